// The emulated device (DESIGN.md §11): device memory is host memory ending at a guard page
// (kernels/simt/device_memory.h), kernels run through the SIMT emulator under the configured
// schedule, work runs when it is enqueued (the stream is the caller's thread), a graph is the
// list of operations recorded during capture and replayed in order, and GEMM is a CPU loop with
// a fixed reduction order (the same bits for a row whatever the batch). Owned by one thread.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cuda/launch_shape.h"
#include "kernels/device/device_runtime.h"
#include "kernels/simt/emulator.h"
#include "kernels/simt/shared_memory_opt_ins.h"

namespace tessera::device {

class EmulatedDeviceRuntime;

// The Launcher for kernels on the emulated device: runs the kernel now, or records it while the
// runtime is capturing. Arguments are copied at launch, as <<<>>> does.
class EmulatedStreamLauncher {
 public:
  explicit EmulatedStreamLauncher(EmulatedDeviceRuntime& runtime) : runtime_(runtime) {}

  template <typename... Params, typename... Args>
  absl::Status Launch(const cuda::LaunchShape& shape, void (*kernel)(Params...), Args&&... args);
  // As CudaLauncher's: lets `kernel` use more than 48 KiB of shared memory.
  template <typename... Params>
  absl::Status AllowDynamicShared(void (*kernel)(Params...), size_t bytes) {
    return opt_ins_.Allow(reinterpret_cast<const void*>(kernel), bytes);
  }

 private:
  EmulatedDeviceRuntime& runtime_;
  simt::SharedMemoryOptIns opt_ins_;
};

class EmulatedDeviceRuntime final : public DeviceRuntime {
 public:
  EmulatedDeviceRuntime(uint64_t memory_bytes, simt::Schedule schedule);
  ~EmulatedDeviceRuntime() override;

  DeviceKind kind() const override { return DeviceKind::kEmulated; }
  const DeviceProperties& properties() const override { return properties_; }
  absl::StatusOr<uint64_t> FreeMemoryBytes() override;

  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* device_pointer) override;
  absl::StatusOr<void*> AllocateHost(size_t bytes) override;
  void FreeHost(void* host_pointer) override;
  absl::Status CopyToDevice(void* device_destination, const void* host_source,
                            size_t bytes) override;
  absl::Status CopyToHost(void* host_destination, const void* device_source,
                          size_t bytes) override;
  absl::Status CopyOnDevice(void* device_destination, const void* device_source,
                            size_t bytes) override;
  absl::Status Fill(void* device_destination, uint8_t byte, size_t bytes) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }

  absl::StatusOr<EventHandle> CreateEvent() override;
  absl::Status RecordEvent(EventHandle event) override;
  absl::StatusOr<double> ElapsedSeconds(EventHandle start, EventHandle end) override;

  absl::Status BeginCapture() override;
  absl::StatusOr<GraphHandle> EndCapture() override;
  absl::Status Replay(GraphHandle graph) override;
  bool capturing() const override { return capture_.has_value(); }

  absl::Status Gemm(const GemmArgs& args) override;

  EmulatedStreamLauncher& launcher() { return launcher_; }
  const simt::Schedule& schedule() const { return schedule_; }

  // Runs `operation` now, or appends it to the graph being captured.
  using Operation = std::function<absl::Status()>;
  absl::Status Enqueue(Operation operation);
  // The same for a kernel launch or a GEMM: it counts in launches() each time it runs.
  absl::Status EnqueueLaunch(Operation operation);
  // Kernel launches and GEMMs run so far, a graph replay counting each one it holds: what the
  // same work costs in launches on a GPU (where cuBLAS may add a split-K reduce to a GEMM).
  int64_t launches() const { return launches_; }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kHostAlignment = 64;

  DeviceProperties properties_;
  uint64_t memory_bytes_;
  uint64_t allocated_bytes_ = 0;
  std::vector<std::pair<void*, size_t>> allocations_;
  simt::Schedule schedule_;
  EmulatedStreamLauncher launcher_;
  std::vector<std::optional<Clock::time_point>> events_;
  std::optional<std::vector<Operation>> capture_;
  std::vector<std::vector<Operation>> graphs_;
  int64_t launches_ = 0;
};

template <typename... Params, typename... Args>
absl::Status EmulatedStreamLauncher::Launch(const cuda::LaunchShape& shape,
                                            void (*kernel)(Params...), Args&&... args) {
  simt::LaunchConfig config;
  config.grid = shape.grid;
  config.block = shape.block;
  config.dynamic_shared_bytes = shape.dynamic_shared_bytes;
  config.shared_bytes_limit = opt_ins_.LimitFor(reinterpret_cast<const void*>(kernel));
  config.schedule = runtime_.schedule();
  std::tuple<std::decay_t<Params>...> params(std::forward<Args>(args)...);
  return runtime_.EnqueueLaunch([config, kernel, params]() {
    return std::apply(
        [&](const auto&... values) { return simt::Launch(config, kernel, values...); }, params);
  });
}

}  // namespace tessera::device
