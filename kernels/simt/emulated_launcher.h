// The Launcher (kernels/cuda/launch_shape.h) that runs kernels on the CPU through the SIMT
// emulator, under the schedule it was built with. Thread-compatible.
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "kernels/cuda/launch_shape.h"
#include "kernels/simt/emulator.h"

namespace tessera::simt {

class EmulatedLauncher {
 public:
  explicit EmulatedLauncher(Schedule schedule = {}) : schedule_(schedule) {}

  template <typename... Params, typename... Args>
  absl::Status Launch(const cuda::LaunchShape& shape, void (*kernel)(Params...), Args&&... args) {
    LaunchConfig config;
    config.grid = shape.grid;
    config.block = shape.block;
    config.dynamic_shared_bytes = shape.dynamic_shared_bytes;
    config.schedule = schedule_;
    return simt::Launch(config, kernel, std::forward<Args>(args)...);
  }

  const Schedule& schedule() const { return schedule_; }

 private:
  Schedule schedule_;
};

}  // namespace tessera::simt
