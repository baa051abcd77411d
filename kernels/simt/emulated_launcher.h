// The Launcher (kernels/cuda/launch_shape.h) that runs kernels on the CPU through the SIMT
// emulator, under the schedule it was built with. As on a GPU, a block gets 48 KiB of shared
// memory unless its kernel opted in to more with AllowDynamicShared (the emulator checks the
// limit at launch and at each static allocation). Thread-compatible.
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "kernels/cuda/launch_shape.h"
#include "kernels/simt/emulator.h"
#include "kernels/simt/shared_memory_opt_ins.h"

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
    config.dependent = shape.dependent;
    config.shared_bytes_limit = opt_ins_.LimitFor(reinterpret_cast<const void*>(kernel));
    config.schedule = schedule_;
    return simt::Launch(config, kernel, std::forward<Args>(args)...);
  }

  // As cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes): later
  // launches of `kernel` may use up to kMaxSharedBytesPerBlock of static + dynamic shared memory.
  template <typename... Params>
  absl::Status AllowDynamicShared(void (*kernel)(Params...), size_t bytes) {
    return opt_ins_.Allow(reinterpret_cast<const void*>(kernel), bytes);
  }

  const Schedule& schedule() const { return schedule_; }

 private:
  Schedule schedule_;
  SharedMemoryOptIns opt_ins_;
};

}  // namespace tessera::simt
