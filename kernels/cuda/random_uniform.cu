// Device build of random_uniform.cuh: the synthetic-weight fill for bf16, f16 and f32.
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/cuda/random_uniform.cuh"

namespace tessera::cuda {

#define TESSERA_INSTANTIATE_RANDOM_UNIFORM(T)                                         \
  template auto LaunchRandomUniform<CudaLauncher, T>(CudaLauncher&, T*, int64_t, \
                                                     const RandomUniformParams&);

TESSERA_INSTANTIATE_RANDOM_UNIFORM(__nv_bfloat16)
TESSERA_INSTANTIATE_RANDOM_UNIFORM(__half)
TESSERA_INSTANTIATE_RANDOM_UNIFORM(float)

#undef TESSERA_INSTANTIATE_RANDOM_UNIFORM

}  // namespace tessera::cuda
