// Device build of logit_adjust.cuh: logit_bias and the structured-output mask.
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/cuda/logit_adjust.cuh"

namespace tessera::cuda {

template auto LaunchLogitAdjust<CudaLauncher>(CudaLauncher&, float*, int, int,
                                              const LogitAdjustments&);

}  // namespace tessera::cuda
