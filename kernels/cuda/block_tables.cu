// Device build of block_tables.cuh.
#include "kernels/cuda/block_tables.cuh"
#include "kernels/cuda/cuda_launcher.h"

namespace tessera::cuda {

template auto LaunchScatterTableDeltas<CudaLauncher>(CudaLauncher&, const TableDelta*,
                                                     const int32_t*, int32_t*, int64_t);

}  // namespace tessera::cuda
