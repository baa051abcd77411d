// Device build of sampling.cuh: the launch instantiated for the GPU launcher.
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/cuda/sampling.cuh"

namespace tessera::cuda {

template auto LaunchSampling<CudaLauncher>(CudaLauncher&, const float*, int, int,
                                           const SamplingRowParams*, const SamplingPenalties&,
                                           const SamplingOutputs&, void*);

}  // namespace tessera::cuda
