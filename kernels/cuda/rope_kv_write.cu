// Device build of rope_kv_write.cuh: the launch for each activation type (both pairing styles).
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/cuda/rope_kv_write.cuh"

namespace tessera::cuda {

#define TESSERA_INSTANTIATE_ROPE_KV_WRITE(T)                                                  \
  template auto LaunchRopeKvWrite<CudaLauncher, T>(                                             \
      CudaLauncher&, RopeStyle, const RopeKvWriteRows<T>&, T*, T*, const int32_t*,            \
      const int32_t*, const float*, int, int, int, int, int, int);

TESSERA_INSTANTIATE_ROPE_KV_WRITE(__nv_bfloat16)
TESSERA_INSTANTIATE_ROPE_KV_WRITE(__half)
TESSERA_INSTANTIATE_ROPE_KV_WRITE(float)

#undef TESSERA_INSTANTIATE_ROPE_KV_WRITE

}  // namespace tessera::cuda
