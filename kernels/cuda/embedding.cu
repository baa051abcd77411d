// Device build of embedding.cuh: the run-time-format gather for each output type (each
// instantiates every table format's kernel).
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/cuda/embedding.cuh"

namespace tessera::cuda {

template auto LaunchEmbedding<CudaLauncher, __nv_bfloat16>(CudaLauncher&, GgufFormat,
                                                           const int32_t*, const uint8_t*,
                                                           __nv_bfloat16*, int, int64_t, int);
template auto LaunchEmbedding<CudaLauncher, __half>(CudaLauncher&, GgufFormat, const int32_t*,
                                                    const uint8_t*, __half*, int, int64_t, int);
template auto LaunchEmbedding<CudaLauncher, float>(CudaLauncher&, GgufFormat, const int32_t*,
                                                   const uint8_t*, float*, int, int64_t, int);

}  // namespace tessera::cuda
