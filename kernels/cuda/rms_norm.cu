// Device build of rms_norm.cuh: the launches instantiated for the GPU launcher.
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/cuda/rms_norm.cuh"

namespace tessera::cuda {

template auto LaunchRmsNorm<CudaLauncher, __nv_bfloat16>(CudaLauncher&, const __nv_bfloat16*, __nv_bfloat16*,
                                   const __nv_bfloat16*, __nv_bfloat16*, int, int, float);
template auto LaunchRmsNorm<CudaLauncher, __half>(CudaLauncher&, const __half*, __half*, const __half*, __half*,
                                   int, int, float);
template auto LaunchRmsNorm<CudaLauncher, float>(CudaLauncher&, const float*, float*, const float*, float*, int,
                                   int, float);

}  // namespace tessera::cuda
