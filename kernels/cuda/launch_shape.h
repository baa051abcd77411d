// How a kernel is launched: the grid, the block and its dynamic shared memory. Plain C++ (CUDA's
// dim3 from vector_types.h), shared by the CUDA launcher (cuda_launcher.h, nvcc) and the
// emulated one (kernels/simt/emulated_launcher.h, g++).
//
// Every kernel header (*.cuh) exposes its launches as templates over a Launcher:
//   template <class Launcher>
//   auto LaunchFoo(Launcher& launcher, args...) {
//     return launcher.Launch(LaunchShape{grid, block, smem}, FooKernel, args...);
//   }
// so the grid arithmetic is written once and `<<<>>>` appears only in cuda_launcher.h.
// A Launcher returns its own status type (cudaError_t on the GPU, absl::Status emulated).
#pragma once

#include <cstddef>

#include <vector_types.h>

namespace tessera::cuda {

struct LaunchShape {
  dim3 grid;
  dim3 block;
  size_t dynamic_shared_bytes = 0;
  // The kernel starts with ptx::GridDependencyWait (before it reads anything an earlier launch
  // wrote, and before any write or exit), so it may be launched as a programmatic dependent of
  // the kernel before it (Hopper's PDL: its blocks are scheduled while that kernel drains, and run
  // their prologue, e.g. the weight prefetch, until the wait). Launchers that cannot, ignore it.
  bool dependent = false;
};

// ceil(a / b) for grid sizes.
constexpr unsigned CeilDiv(unsigned a, unsigned b) { return (a + b - 1) / b; }

}  // namespace tessera::cuda
