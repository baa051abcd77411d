// Device build of token_mask.cuh: the structured-output logits mask.
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/cuda/token_mask.cuh"

namespace tessera::cuda {

template auto LaunchTokenMask<CudaLauncher>(CudaLauncher&, float*, int, int, const uint32_t*,
                                            const int32_t*);

}  // namespace tessera::cuda
