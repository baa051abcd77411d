// Device build of kv_write.cuh: the launches instantiated for the GPU launcher (bf16, f16 and
// f32 pools).
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/cuda/kv_write.cuh"

namespace tessera::cuda {

template auto LaunchKvWrite<CudaLauncher, __nv_bfloat16>(CudaLauncher&, const __nv_bfloat16*,
                                                         const __nv_bfloat16*, __nv_bfloat16*,
                                                         __nv_bfloat16*, const int32_t*, int, int,
                                                         int);
template auto LaunchKvWrite<CudaLauncher, __half>(CudaLauncher&, const __half*, const __half*,
                                                  __half*, __half*, const int32_t*, int, int, int);
template auto LaunchKvWrite<CudaLauncher, float>(CudaLauncher&, const float*, const float*, float*,
                                                 float*, const int32_t*, int, int, int);

}  // namespace tessera::cuda
