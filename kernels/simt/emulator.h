// The SIMT emulator's host API: launch a CUDA-style kernel (the same source nvcc compiles for
// the device, compiled by g++ against kernels/simt/device_api.h) on the CPU.
//
// Every CUDA thread of a block is a fiber (Boost.Context) on the calling OS thread; blocks run
// one after another. A thread runs until it reaches a synchronisation point (__syncthreads, a
// warp collective, exit); the schedule (schedule.h) then picks which runnable thread goes next.
// Errors the emulator detects (divergent barriers, bad warp masks, deadlocks, shared memory
// overflow) stop the launch and come back as an INTERNAL status naming the source lines.
// Out-of-bounds device memory reads fault on a guard page (device_memory.h) and abort loudly.
//
// Thread-compatible: one launch at a time per OS thread; launches on different OS threads are
// independent.
#pragma once

#include <cstddef>
#include <functional>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "kernels/simt/schedule.h"
#include "kernels/simt/vector_types.h"

namespace tessera::simt {

// Shared memory a block may use (static + dynamic) without opting in, as on every CUDA GPU.
inline constexpr size_t kDefaultSharedBytesPerBlock = 48 * 1024;
// Largest shared memory one block may use (static + dynamic) after opting in: H100's maximum.
inline constexpr size_t kMaxSharedBytesPerBlock = 227 * 1024;

struct LaunchConfig {
  dim3 grid;
  dim3 block;
  size_t dynamic_shared_bytes = 0;
  // The block's static + dynamic shared memory limit, as CUDA applies it: 48 KiB unless the
  // kernel opted in to more (cudaFuncAttributeMaxDynamicSharedMemorySize; the emulated
  // launcher's AllowDynamicShared), never above kMaxSharedBytesPerBlock.
  size_t shared_bytes_limit = kDefaultSharedBytesPerBlock;
  // A programmatic dependent launch (LaunchShape::dependent): launches run one after another
  // here, so the only thing to check is the kernel's promise, that every thread passes
  // ptx::GridDependencyWait (a thread that exits without it fails the launch).
  bool dependent = false;
  Schedule schedule;
  size_t stack_bytes = 64 * 1024;  // per emulated thread; a guard page below catches overflow
};

inline constexpr int kMaxThreadsPerBlock = 1024;

// Runs `body` once per thread of every block. Prefer Launch() below.
absl::Status LaunchErased(const LaunchConfig& config, const std::function<void()>& body);

// Launches `kernel` with arguments converted to its parameter types, as <<<>>> would.
template <typename... Params, typename... Args>
absl::Status Launch(const LaunchConfig& config, void (*kernel)(Params...), Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "kernel argument count mismatch");
  const std::tuple<Params...> params(std::forward<Args>(args)...);
  return LaunchErased(config, [&params, kernel] { std::apply(kernel, params); });
}

}  // namespace tessera::simt
