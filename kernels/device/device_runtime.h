// The device runtime the CUDA worker runs on (DESIGN.md §5, §11): memory, copies, one ordered
// stream, events, graph capture/replay and dense GEMM, with two implementations:
//   cuda      — the CUDA runtime and cuBLAS on a real GPU (cuda_device_runtime.h)
//   emulated  — host memory with guard pages, kernels through the SIMT emulator, a graph is the
//               recorded operation list replayed in order, GEMM a CPU loop
//               (emulated_device_runtime.h, emulated_gemm.h)
// so the runner, its graph cache and its metrics run end to end in CI without a GPU.
//
// All work is ordered on the runtime's single stream. Kernels are launched through the
// implementation's Launcher (kernels/cuda/launch_shape.h), which the caller gets from the
// concrete class. Owned by one thread (the worker's step thread); not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera::device {

enum class DeviceKind { kCuda, kEmulated };
std::string_view DeviceKindName(DeviceKind kind);

struct DeviceProperties {
  std::string name;
  uint64_t total_memory_bytes = 0;
  int multiprocessor_count = 0;
  int compute_major = 0;  // 0 on the emulated device
  int compute_minor = 0;
  uint64_t max_shared_bytes_per_block = 0;  // static + dynamic, after a kernel opts in
};

enum class DataType { kF32, kBf16, kF16 };
size_t DataTypeBytes(DataType type);
// "bf16", "f16" or "f32".
const char* DataTypeName(DataType type);

// c[m, n] = a[m, k] · b[n, k]ᵀ, all row-major and packed; f32 accumulation. b is the weight
// (one row per output feature), as in the CPU engine.
struct GemmArgs {
  DataType a_type = DataType::kBf16;
  DataType b_type = DataType::kBf16;
  DataType c_type = DataType::kBf16;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
};
// OK, or INVALID_ARGUMENT when a shape is not positive or an operand pointer is null: what every
// implementation's Gemm checks first.
absl::Status ValidateGemm(const GemmArgs& args);

using EventHandle = int;
using GraphHandle = int;

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;

  virtual DeviceKind kind() const = 0;
  virtual const DeviceProperties& properties() const = 0;
  virtual absl::StatusOr<uint64_t> FreeMemoryBytes() = 0;

  // Not allowed while capturing (as cudaMalloc).
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  virtual void Free(void* device_pointer) = 0;
  // Host memory for copies to and from the device: page-locked on cuda (cudaHostAlloc), so a
  // copy is truly asynchronous and the host buffer must not change until it has executed;
  // ordinary memory on the emulated device. Not allowed while capturing.
  virtual absl::StatusOr<void*> AllocateHost(size_t bytes) = 0;
  virtual void FreeHost(void* host_pointer) = 0;

  // Ordered on the stream. The host buffer must stay valid and unchanged until the stream has
  // executed the copy (Synchronize). Inside a capture the copy is recorded with its pointers:
  // each replay copies what the host buffer holds at that moment.
  virtual absl::Status CopyToDevice(void* device_destination, const void* host_source,
                                    size_t bytes) = 0;
  virtual absl::Status CopyToHost(void* host_destination, const void* device_source,
                                  size_t bytes) = 0;
  virtual absl::Status CopyOnDevice(void* device_destination, const void* device_source,
                                    size_t bytes) = 0;
  virtual absl::Status Fill(void* device_destination, uint8_t byte, size_t bytes) = 0;
  // Waits until everything enqueued so far has executed.
  virtual absl::Status Synchronize() = 0;

  virtual absl::StatusOr<EventHandle> CreateEvent() = 0;
  virtual absl::Status RecordEvent(EventHandle event) = 0;
  // Seconds between two recorded events; waits for `end`. On the emulated device this is the
  // host time the emulation took, not a GPU timing.
  virtual absl::StatusOr<double> ElapsedSeconds(EventHandle start, EventHandle end) = 0;

  // Everything enqueued between Begin and End becomes a graph instead of running.
  virtual absl::Status BeginCapture() = 0;
  virtual absl::StatusOr<GraphHandle> EndCapture() = 0;
  virtual absl::Status Replay(GraphHandle graph) = 0;
  virtual bool capturing() const = 0;

  virtual absl::Status Gemm(const GemmArgs& args) = 0;
};

struct DeviceOptions {
  DeviceKind kind = DeviceKind::kEmulated;
  int cuda_device_index = 0;
  // Bring-up: wait after every kernel launch and cuBLAS call outside graph capture, so a fault
  // is reported by the launch that caused it, naming the kernel (slow; off in production).
  bool cuda_sync_each_launch = false;
  // Kernels written for it start while the kernel before them drains (programmatic dependent
  // launch, cuda_launcher.h); off: every kernel waits for the previous one's end
  // (docs/perf/packed-stream.md has the A/B).
  bool cuda_dependent_launch = true;
  // The emulated device's memory size. OpenDevice's emulated device runs a block's threads in
  // order; a caller that picks the emulator's schedule constructs EmulatedDeviceRuntime
  // (emulated_device_runtime.h) itself.
  uint64_t emulated_memory_bytes = uint64_t{4} << 30;
};

// UNAVAILABLE with a one-line reason when the device cannot be used (no CUDA in this build, no
// driver, no GPU); FAILED_PRECONDITION when the GPU's architecture is not one this build has
// kernels for.
absl::StatusOr<std::unique_ptr<DeviceRuntime>> OpenDevice(const DeviceOptions& options);

}  // namespace tessera::device
