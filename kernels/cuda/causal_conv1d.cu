// Device build of causal_conv1d.cuh: the launches instantiated for the GPU launcher.
#include "kernels/cuda/causal_conv1d.cuh"
#include "kernels/cuda/cuda_launcher.h"

namespace tessera::cuda {

#define TESSERA_INSTANTIATE_CAUSAL_CONV1D(T)                                                     \
  template auto LaunchCausalConv1d<CudaLauncher, T>(CudaLauncher&, const T*, int64_t, const T*,  \
                                                    const DeviceRecurrentSequence*, int, float*, \
                                                    T*, int64_t, int, int, bool);
TESSERA_INSTANTIATE_CAUSAL_CONV1D(__nv_bfloat16)
TESSERA_INSTANTIATE_CAUSAL_CONV1D(__half)
TESSERA_INSTANTIATE_CAUSAL_CONV1D(float)
#undef TESSERA_INSTANTIATE_CAUSAL_CONV1D

}  // namespace tessera::cuda
