// Device build of elementwise.cuh: add-in-place, bias add and row gather for bf16, f16, f32.
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/cuda/elementwise.cuh"

namespace tessera::cuda {

#define TESSERA_INSTANTIATE_ELEMENTWISE(T)                                                   \
  template auto LaunchAddInPlace<CudaLauncher, T>(CudaLauncher&, T*, const T*, int64_t);    \
  template auto LaunchAddBias<CudaLauncher, T>(CudaLauncher&, T*, const T*, int, int);      \
  template auto LaunchGatherRows<CudaLauncher, T>(CudaLauncher&, const T*, const int32_t*, \
                                                  T*, int, int);

TESSERA_INSTANTIATE_ELEMENTWISE(__nv_bfloat16)
TESSERA_INSTANTIATE_ELEMENTWISE(__half)
TESSERA_INSTANTIATE_ELEMENTWISE(float)

#undef TESSERA_INSTANTIATE_ELEMENTWISE

}  // namespace tessera::cuda
