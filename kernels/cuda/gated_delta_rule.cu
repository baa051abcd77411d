// Device build of gated_delta_rule.cuh: the launches instantiated for the GPU launcher.
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/cuda/gated_delta_rule.cuh"

namespace tessera::cuda {

#define TESSERA_INSTANTIATE_GATED_DELTA_RULE(T)                                  \
  template auto AllowGatedDeltaRuleSharedMemory<T, CudaLauncher>(CudaLauncher&); \
  template auto LaunchGatedDeltaRule<CudaLauncher, T>(                           \
      CudaLauncher&, const GdnDeviceParams&, const GdnDeviceInputs<T>&,          \
      const DeviceRecurrentSequence*, int, float*, T*, GdnForm);
TESSERA_INSTANTIATE_GATED_DELTA_RULE(__nv_bfloat16)
TESSERA_INSTANTIATE_GATED_DELTA_RULE(__half)
TESSERA_INSTANTIATE_GATED_DELTA_RULE(float)
#undef TESSERA_INSTANTIATE_GATED_DELTA_RULE

}  // namespace tessera::cuda
