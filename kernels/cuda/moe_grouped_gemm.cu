// Device build of moe_grouped_gemm.cuh: T in {bf16, f16, f32}, outputs (C, y) in T or f32.
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/cuda/moe_grouped_gemm.cuh"

namespace tessera::cuda {

#define TESSERA_INSTANTIATE_MOE(T, TY)                                                        \
  template auto LaunchMoeGroupedGemm<CudaLauncher, T, TY>(                                    \
      CudaLauncher&, const T*, const ExpertStack<T>&, TY*, const MoeGemmGroups&, int, int, int,  \
      int);                                                                                    \
  template auto LaunchMoeCombine<CudaLauncher, TY, T>(CudaLauncher&, const TY*, const float*, \
                                                      const int32_t*, const T*, const float*, \
                                                      T*, int, int, int);                     \
  template auto LaunchMoeExperts<CudaLauncher, T, TY>(CudaLauncher&, const MoeGemmGroups&,    \
                                                      const MoeExpertsArgs<T, TY>&);

TESSERA_INSTANTIATE_MOE(__nv_bfloat16, __nv_bfloat16)
TESSERA_INSTANTIATE_MOE(__nv_bfloat16, float)
TESSERA_INSTANTIATE_MOE(__half, __half)
TESSERA_INSTANTIATE_MOE(__half, float)
TESSERA_INSTANTIATE_MOE(float, float)

#undef TESSERA_INSTANTIATE_MOE

}  // namespace tessera::cuda
