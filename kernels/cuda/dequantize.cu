// Device build of dequantize.cuh: the run-time-format launch for the GPU launcher (it
// instantiates every format's kernel).
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/cuda/dequantize.cuh"

namespace tessera::cuda {

template auto LaunchDequantizeToBf16<CudaLauncher>(CudaLauncher&, GgufFormat, const uint8_t*,
                                                   __nv_bfloat16*, int64_t, int64_t);

}  // namespace tessera::cuda
