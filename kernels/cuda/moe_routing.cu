// Device build of moe_routing.cuh: routing (softmax, top-k, weights) and the grouping by expert.
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/cuda/moe_routing.cuh"

namespace tessera::cuda {

template auto LaunchMoeRoute<CudaLauncher>(CudaLauncher&, float*, int, int, int, bool, int32_t*,
                                           float*);
template auto LaunchMoeGroupByExpert<CudaLauncher>(CudaLauncher&, const int32_t*, int, int, int,
                                                   const MoeGroupsView&);
template auto LaunchMoeRouting<CudaLauncher>(CudaLauncher&, float*, int, int, int, bool, int32_t*,
                                             float*, const MoeGroupsView&);

}  // namespace tessera::cuda
