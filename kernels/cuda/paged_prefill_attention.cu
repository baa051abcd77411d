// Device build of paged_prefill_attention.cuh: bf16, f16 and f32 (the runner's
// --dtype f32), head dims 64, 80, 96, 128 and 256.
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/cuda/paged_prefill_attention.cuh"

namespace tessera::cuda {

#define TESSERA_INSTANTIATE_PAGED_PREFILL(T, kHeadDim)                                         \
  template auto LaunchPagedPrefillAttention<CudaLauncher, T, kHeadDim>(                        \
      CudaLauncher&, const PagedPrefillParams&, const T*, const T*, const T*, const int32_t*, \
      const int32_t*, const int32_t*, T*);

TESSERA_INSTANTIATE_PAGED_PREFILL(__nv_bfloat16, 64)
TESSERA_INSTANTIATE_PAGED_PREFILL(__nv_bfloat16, 80)
TESSERA_INSTANTIATE_PAGED_PREFILL(__nv_bfloat16, 96)
TESSERA_INSTANTIATE_PAGED_PREFILL(__nv_bfloat16, 128)
TESSERA_INSTANTIATE_PAGED_PREFILL(__nv_bfloat16, 256)
TESSERA_INSTANTIATE_PAGED_PREFILL(__half, 64)
TESSERA_INSTANTIATE_PAGED_PREFILL(__half, 80)
TESSERA_INSTANTIATE_PAGED_PREFILL(__half, 96)
TESSERA_INSTANTIATE_PAGED_PREFILL(__half, 128)
TESSERA_INSTANTIATE_PAGED_PREFILL(__half, 256)
TESSERA_INSTANTIATE_PAGED_PREFILL(float, 64)
TESSERA_INSTANTIATE_PAGED_PREFILL(float, 80)
TESSERA_INSTANTIATE_PAGED_PREFILL(float, 96)
TESSERA_INSTANTIATE_PAGED_PREFILL(float, 128)
TESSERA_INSTANTIATE_PAGED_PREFILL(float, 256)

#undef TESSERA_INSTANTIATE_PAGED_PREFILL

}  // namespace tessera::cuda
