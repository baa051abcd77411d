// Device build of paged_decode_attention.cuh: bf16, f16 and f32 (the runner's
// --dtype f32), head dims 64, 80, 96, 128 and 256.
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/cuda/paged_decode_attention.cuh"

namespace tessera::cuda {

#define TESSERA_INSTANTIATE_PAGED_DECODE(T, kHeadDim)                                         \
  template auto LaunchPagedDecodeAttention<CudaLauncher, T, kHeadDim>(                        \
      CudaLauncher&, const PagedDecodeParams&, const T*, const T*, const T*, const int32_t*, \
      const int32_t*, T*, float*);

TESSERA_INSTANTIATE_PAGED_DECODE(__nv_bfloat16, 64)
TESSERA_INSTANTIATE_PAGED_DECODE(__nv_bfloat16, 80)
TESSERA_INSTANTIATE_PAGED_DECODE(__nv_bfloat16, 96)
TESSERA_INSTANTIATE_PAGED_DECODE(__nv_bfloat16, 128)
TESSERA_INSTANTIATE_PAGED_DECODE(__nv_bfloat16, 256)
TESSERA_INSTANTIATE_PAGED_DECODE(__half, 64)
TESSERA_INSTANTIATE_PAGED_DECODE(__half, 80)
TESSERA_INSTANTIATE_PAGED_DECODE(__half, 96)
TESSERA_INSTANTIATE_PAGED_DECODE(__half, 128)
TESSERA_INSTANTIATE_PAGED_DECODE(__half, 256)
TESSERA_INSTANTIATE_PAGED_DECODE(float, 64)
TESSERA_INSTANTIATE_PAGED_DECODE(float, 80)
TESSERA_INSTANTIATE_PAGED_DECODE(float, 96)
TESSERA_INSTANTIATE_PAGED_DECODE(float, 128)
TESSERA_INSTANTIATE_PAGED_DECODE(float, 256)

#undef TESSERA_INSTANTIATE_PAGED_DECODE

}  // namespace tessera::cuda
