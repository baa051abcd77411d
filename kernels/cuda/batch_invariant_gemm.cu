// Device build of batch_invariant_gemm.cuh: (A, B, C) = (bf16, bf16, bf16 | f32),
// (f16, f16, f16 | f32), (f32, f32, f32).
#include "kernels/cuda/batch_invariant_gemm.cuh"
#include "kernels/cuda/cuda_launcher.h"

namespace tessera::cuda {

#define TESSERA_INSTANTIATE_GEMM(TA, TB, TC)                                                 \
  template auto LaunchBatchInvariantGemm<CudaLauncher, TA, TB, TC>(CudaLauncher&, const TA*, \
                                                                   const TB*, TC*, int, int, \
                                                                   int);

TESSERA_INSTANTIATE_GEMM(__nv_bfloat16, __nv_bfloat16, __nv_bfloat16)
TESSERA_INSTANTIATE_GEMM(__nv_bfloat16, __nv_bfloat16, float)
TESSERA_INSTANTIATE_GEMM(__half, __half, __half)
TESSERA_INSTANTIATE_GEMM(__half, __half, float)
TESSERA_INSTANTIATE_GEMM(float, float, float)

#undef TESSERA_INSTANTIATE_GEMM

}  // namespace tessera::cuda
