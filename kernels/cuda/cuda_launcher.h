// The Launcher (launch_shape.h) for a real GPU: the one place `<<<>>>` is written. nvcc only:
// included from .cu files (never from a .cuh, which g++ also compiles for the emulator).
// Returns the launch error (bad configuration, too much shared memory); errors of the kernel's
// execution surface at the next synchronisation, as in CUDA.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "kernels/cuda/launch_shape.h"

namespace tessera::cuda {

class CudaLauncher {
 public:
  explicit CudaLauncher(cudaStream_t stream) : stream_(stream) {}

  template <typename... Params, typename... Args>
  cudaError_t Launch(const LaunchShape& shape, void (*kernel)(Params...), Args&&... args) {
    kernel<<<shape.grid, shape.block, shape.dynamic_shared_bytes, stream_>>>(
        static_cast<Params>(std::forward<Args>(args))...);
    return cudaGetLastError();
  }

 private:
  cudaStream_t stream_;
};

}  // namespace tessera::cuda
