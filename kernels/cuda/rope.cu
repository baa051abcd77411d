// Device build of rope.cuh: the launch (both pairing styles) for each activation type.
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/cuda/rope.cuh"

namespace tessera::cuda {

template auto LaunchRope<CudaLauncher, __nv_bfloat16>(CudaLauncher&, RopeStyle, __nv_bfloat16*,
                                                      __nv_bfloat16*, const int32_t*,
                                                      const float*, int, int, int, int, int, int);
template auto LaunchRope<CudaLauncher, __half>(CudaLauncher&, RopeStyle, __half*, __half*,
                                               const int32_t*, const float*, int, int, int, int,
                                               int, int);
template auto LaunchRope<CudaLauncher, float>(CudaLauncher&, RopeStyle, float*, float*,
                                              const int32_t*, const float*, int, int, int, int,
                                              int, int);

}  // namespace tessera::cuda
