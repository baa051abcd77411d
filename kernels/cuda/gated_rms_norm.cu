// Device build of gated_rms_norm.cuh and gdn_gates.cuh: the launches instantiated for the GPU
// launcher.
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/cuda/gated_rms_norm.cuh"
#include "kernels/cuda/gdn_gates.cuh"

namespace tessera::cuda {

#define TESSERA_INSTANTIATE_GDN_NORM_AND_GATES(T)                                                  \
  template auto LaunchGatedRmsNorm<CudaLauncher, T>(CudaLauncher&, const T*, const T*, int64_t,    \
                                                    const T*, T*, int64_t, int, int, float);       \
  template auto LaunchGdnGates<CudaLauncher, T>(CudaLauncher&, const T*, int64_t, const T*,        \
                                                int64_t, const float*, const float*, int64_t, int, \
                                                float*, float*);
TESSERA_INSTANTIATE_GDN_NORM_AND_GATES(__nv_bfloat16)
TESSERA_INSTANTIATE_GDN_NORM_AND_GATES(__half)
TESSERA_INSTANTIATE_GDN_NORM_AND_GATES(float)
#undef TESSERA_INSTANTIATE_GDN_NORM_AND_GATES

}  // namespace tessera::cuda
