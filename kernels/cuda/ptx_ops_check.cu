// Device build of every ptx_ops.cuh wrapper: one kernel that uses each instruction, so ptxas
// assembles (and CI's -Werror build checks) the inline PTX for every target architecture even
// before a production kernel uses it. Not launched by tessera.
#include "kernels/cuda/ptx_ops.cuh"

namespace tessera::cuda {

__global__ void PtxOpsAssemblyCheck(const __nv_bfloat16* a, float* d) {
  TESSERA_SHARED(__nv_bfloat16, tile, 256);
  const int lane = threadIdx.x;
  ptx::CpAsync16(tile + lane * 8, a + lane * 8);
  ptx::CpAsyncCommit();
  ptx::CpAsyncWait<0>();
  __syncthreads();
  uint32_t x4[4], x2[2], x1[1], t4[4], t2[2], t1[1];
  const __nv_bfloat16* row = tile + (lane % 16) * 16 + 8 * (lane / 16);
  ptx::LdMatrix<4>(x4, row);
  ptx::LdMatrix<2>(x2, row);
  ptx::LdMatrix<1>(x1, row);
  ptx::LdMatrix<4, true>(t4, row);
  ptx::LdMatrix<2, true>(t2, row);
  ptx::LdMatrix<1, true>(t1, row);
  float c[4] = {0, 0, 0, float(x1[0] ^ t1[0])}, out[4];
  ptx::MmaM16N8K16<ptx::MmaType::kBf16>(out, x4, x2, c);
  ptx::MmaM16N8K16<ptx::MmaType::kF16>(c, t4, t2, out);
  for (int i = 0; i < 4; ++i) d[lane * 4 + i] = c[i];
}

}  // namespace tessera::cuda
