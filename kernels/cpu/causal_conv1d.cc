#include "kernels/cpu/causal_conv1d.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/util/check.h"
#include "kernels/cpu/simd_avx2.h"
#include "kernels/cpu/simd_avx512.h"
#include "kernels/cpu/simd_scalar.h"

namespace tessera::kernels::cpu {
namespace {

struct ConvArgs {
  const float* weight;  // [C, K]
  const float* x;       // [rows, C], stride x_stride
  float* states;        // [num_slots, K-1, C]
  float* out;           // [rows, C], stride out_stride
  std::span<const RecurrentSequence> sequences;
  int64_t channels;
  int kernel_size;
  int64_t x_stride;
  int64_t out_stride;
  bool apply_silu;
};

// Per-thread buffer for a range's transposed weights, grown on demand and reused (defined
// outside the ISA target regions, like every standard-library use).
float* TapScratch(size_t num_floats) {
  thread_local std::vector<float> scratch;
  if (scratch.size() < num_floats) scratch.resize(num_floats);
  return scratch.data();
}

}  // namespace

namespace scalar {
#include "kernels/cpu/causal_conv1d_impl.inc"
}  // namespace scalar

#if TESSERA_X86_SIMD
TESSERA_BEGIN_TARGET_AVX2
namespace avx2 {
#include "kernels/cpu/causal_conv1d_impl.inc"
}  // namespace avx2
TESSERA_END_TARGET

TESSERA_BEGIN_TARGET_AVX512
namespace avx512 {
#include "kernels/cpu/causal_conv1d_impl.inc"
}  // namespace avx512
TESSERA_END_TARGET
#endif

namespace {

// Checks shapes; returns the number of rows the sequences cover.
int64_t ValidateConv(const CausalConvParams& p, std::span<const float> weight,
                     std::span<const float> x, int64_t x_stride,
                     std::span<const RecurrentSequence> sequences, std::span<const float> states,
                     std::span<const float> out, int64_t out_stride) {
  TESSERA_CHECK(p.channels > 0, "CausalConv1d: channels must be positive");
  TESSERA_CHECK(p.kernel_size >= 1, "CausalConv1d: kernel_size must be at least 1");
  TESSERA_CHECK(static_cast<int64_t>(weight.size()) >= p.channels * p.kernel_size,
                "CausalConv1d: weight smaller than [C, K]");
  TESSERA_CHECK(x_stride >= p.channels && out_stride >= p.channels,
                "CausalConv1d: row stride smaller than the channel count");
  const int64_t state_elements = ConvStateElements(p);
  int64_t num_slots = 0;
  if (state_elements > 0) {
    num_slots = static_cast<int64_t>(states.size()) / state_elements;
  } else {  // K = 1 keeps no state: any slot number is fine, duplicates are still checked
    for (const RecurrentSequence& s : sequences) num_slots = std::max(num_slots, s.state_slot + 1);
  }
  const int64_t rows =
      ValidateRecurrentSequences(sequences, num_slots, "CausalConv1d: bad sequence list");
  TESSERA_CHECK(static_cast<int64_t>(x.size()) >= StridedExtent(rows, x_stride, p.channels),
                "CausalConv1d: x does not cover the rows");
  TESSERA_CHECK(static_cast<int64_t>(out.size()) >= StridedExtent(rows, out_stride, p.channels),
                "CausalConv1d: out does not cover the rows");
  return rows;
}

}  // namespace

void CausalConv1d(ThreadPool& pool, const CausalConvParams& params, std::span<const float> weight,
                  std::span<const float> x, int64_t x_stride,
                  std::span<const RecurrentSequence> sequences, std::span<float> states,
                  std::span<float> out, int64_t out_stride, Isa isa) {
  TESSERA_CHECK(IsaSupported(isa), "CausalConv1d: ISA not supported by this CPU");
  const int64_t rows =
      ValidateConv(params, weight, x, x_stride, sequences, states, out, out_stride);
  if (rows == 0) return;
  const ConvArgs args{weight.data(), x.data(),         states.data(),      out.data(),
                      sequences,     params.channels,  params.kernel_size, x_stride,
                      out_stride,    params.apply_silu};
  // Work items: blocks of 16 channels; a range of blocks runs every sequence, so its weights are
  // gathered once per call, and each element's arithmetic never depends on the split.
  const int64_t num_blocks = (params.channels + 15) / 16;
  pool.ParallelFor(num_blocks, [&](int64_t begin, int64_t end) {
    switch (isa) {
#if TESSERA_X86_SIMD
      case Isa::kAvx512:
        return avx512::ConvBlocks(args, begin, end);
      case Isa::kAvx2:
        return avx2::ConvBlocks(args, begin, end);
#endif
      default:
        return scalar::ConvBlocks(args, begin, end);
    }
  });
}

}  // namespace tessera::kernels::cpu
