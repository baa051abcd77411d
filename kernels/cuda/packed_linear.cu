// Device build of packed_linear.cuh: LaunchPackedLinear (every scheme, both paths) for bf16 and
// f16 activations.
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/cuda/packed_linear.cuh"

namespace tessera::cuda {

template auto LaunchPackedLinear<CudaLauncher, __nv_bfloat16>(CudaLauncher&, const __nv_bfloat16*,
                                                             int, const PackedLinear&,
                                                             __nv_bfloat16*,
                                                             const PackedStreamWorkspace&);
template auto LaunchPackedLinear<CudaLauncher, __half>(CudaLauncher&, const __half*, int,
                                                      const PackedLinear&, __half*,
                                                      const PackedStreamWorkspace&);

}  // namespace tessera::cuda
