// Device build of activations.cuh: the fused and separate SwiGLU launches for each type.
#include "kernels/cuda/activations.cuh"
#include "kernels/cuda/cuda_launcher.h"

namespace tessera::cuda {

#define TESSERA_SWIGLU_INSTANTIATE(T)                                                         \
  template auto LaunchSwiGluFused<CudaLauncher, T>(CudaLauncher&, const T*, T*, int, int);    \
  template auto LaunchSwiGlu<CudaLauncher, T>(CudaLauncher&, const T*, const T*, T*, int, int);
TESSERA_SWIGLU_INSTANTIATE(__nv_bfloat16)
TESSERA_SWIGLU_INSTANTIATE(__half)
TESSERA_SWIGLU_INSTANTIATE(float)
#undef TESSERA_SWIGLU_INSTANTIATE

}  // namespace tessera::cuda
