#include "kernels/cpu/matmul.h"

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common/gguf/fp4_codec.h"

#include "common/util/check.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/simd_avx2.h"
#include "kernels/cpu/simd_avx512.h"
#include "kernels/cpu/simd_scalar.h"

namespace tessera::kernels::cpu {
namespace {

struct MatmulArgs {
  const float* x;  // [m, k]
  int64_t m;
  int64_t k;
  WeightView w;  // [n, k]
  size_t row_bytes;
  float* y;  // [m, n]
  int64_t n;
};

// Per-thread dequantization panel, grown on demand and reused (no allocation in steady state).
// Cache-line aligned: its rows (k a multiple of 32) then start on a line, and 64-byte loads
// never split across two lines.
float* PanelScratch(size_t num_floats) {
  constexpr size_t kAlignFloats = 16;
  thread_local std::vector<float> scratch;
  if (scratch.size() < num_floats + kAlignFloats) scratch.resize(num_floats + kAlignFloats);
  const auto address = reinterpret_cast<uintptr_t>(scratch.data());
  const size_t skip = (64 - address % 64) % 64 / sizeof(float);
  return scratch.data() + skip;
}

// Same on every ISA: quantized blocks are decoded in registers for m <= kInlineDequantMaxRows;
// up to kSmallBatchRows rows, panels are dequantized a few weight rows at a time (L1).
constexpr int kInlineDequantMaxRows = 2;
constexpr int kSmallBatchRows = 16;

}  // namespace

namespace scalar {
constexpr int kMaxTileRows = 2;
constexpr int kColsWide = 4;
constexpr int kColsNarrow = 2;
#include "kernels/cpu/matmul_impl.inc"
}  // namespace scalar

#if TESSERA_X86_SIMD
TESSERA_BEGIN_TARGET_AVX2
namespace avx2 {
constexpr int kMaxTileRows = 2;
constexpr int kColsWide = 4;
constexpr int kColsNarrow = 3;
#include "kernels/cpu/matmul_impl.inc"
}  // namespace avx2
TESSERA_END_TARGET

TESSERA_BEGIN_TARGET_AVX512
namespace avx512 {
constexpr int kMaxTileRows = 4;
constexpr int kColsWide = 8;
constexpr int kColsNarrow = 4;
#include "kernels/cpu/matmul_impl.inc"
}  // namespace avx512
TESSERA_END_TARGET
#endif

bool MatmulSupportsFormat(WeightFormat format) {
  return format == WeightFormat::kF32 || format == WeightFormat::kQ8_0 ||
         format == WeightFormat::kQ4_0 || format == WeightFormat::kQ4_1 ||
         format == WeightFormat::kMxfp4 || format == WeightFormat::kNvfp4;
}

namespace {

void CheckOutput(std::span<const float> x, int64_t m, const MatmulOutput& out) {
  const WeightView& w = out.w;
  TESSERA_CHECK(MatmulSupportsFormat(w.format), "Matmul: unsupported weight format");
  TESSERA_CHECK(m >= 0 && w.rows >= 0 && w.cols >= 0, "Matmul: negative dimension");
  TESSERA_CHECK(static_cast<int64_t>(x.size()) >= m * w.cols, "Matmul: x is smaller than [m, k]");
  TESSERA_CHECK(static_cast<int64_t>(out.y.size()) >= m * w.rows,
                "Matmul: y is smaller than [m, n]");
  TESSERA_CHECK(w.data != nullptr || w.rows * w.cols == 0, "Matmul: null weights");
}

void RunPanels(Isa isa, const MatmulArgs& args, int64_t begin, int64_t end, float* scratch) {
  switch (isa) {
#if TESSERA_X86_SIMD
    case Isa::kAvx512:
      return avx512::MatmulPanels(args, begin, end, scratch);
    case Isa::kAvx2:
      return avx2::MatmulPanels(args, begin, end, scratch);
#endif
    default:
      return scalar::MatmulPanels(args, begin, end, scratch);
  }
}

}  // namespace

void MatmulSameInput(ThreadPool& pool, std::span<const float> x, int64_t m,
                     std::span<const MatmulOutput> outputs, Isa isa) {
  TESSERA_CHECK(!outputs.empty() && outputs.size() <= kMaxMatmulOutputs,
                "MatmulSameInput: 1 to kMaxMatmulOutputs outputs");
  TESSERA_CHECK(IsaSupported(isa), "Matmul: ISA not supported by this CPU");
  const int64_t k = outputs[0].w.cols;
  MatmulArgs args[kMaxMatmulOutputs];
  int64_t first_panel[kMaxMatmulOutputs + 1] = {0};
  bool quantized = false;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const MatmulOutput& out = outputs[i];
    CheckOutput(x, m, out);
    TESSERA_CHECK(out.w.cols == k, "MatmulSameInput: outputs differ in k");
    args[i] = MatmulArgs{x.data(), m, k, out.w, RowBytes(out.w.format, k), out.y.data(), out.w.rows};
    first_panel[i + 1] = first_panel[i] + (out.w.rows + kMatmulPanelRows - 1) / kMatmulPanelRows;
    quantized = quantized || out.w.format != WeightFormat::kF32;
  }
  if (m == 0 || first_panel[outputs.size()] == 0) return;
  // Panels of all outputs, back to back; a range may span two outputs.
  pool.ParallelFor(first_panel[outputs.size()], [&](int64_t begin, int64_t end) {
    float* scratch = quantized ? PanelScratch(static_cast<size_t>(kMatmulPanelRows * k)) : nullptr;
    for (size_t i = 0; i < outputs.size(); ++i) {
      const int64_t lo = begin > first_panel[i] ? begin : first_panel[i];
      const int64_t hi = end < first_panel[i + 1] ? end : first_panel[i + 1];
      if (lo < hi) RunPanels(isa, args[i], lo - first_panel[i], hi - first_panel[i], scratch);
    }
  });
}

void MatmulMany(ThreadPool& pool, std::span<const MatmulProblem> problems, Isa isa) {
  TESSERA_CHECK(IsaSupported(isa), "Matmul: ISA not supported by this CPU");
  int64_t total_panels = 0;
  int64_t scratch_k = 0;  // widest quantized matrix: the dequantization panel's row length
  for (const MatmulProblem& p : problems) {
    CheckOutput(p.x, p.m, MatmulOutput{p.w, p.y});
    if (p.m == 0) continue;
    total_panels += (p.w.rows + kMatmulPanelRows - 1) / kMatmulPanelRows;
    if (p.w.format != WeightFormat::kF32 && p.w.cols > scratch_k) scratch_k = p.w.cols;
  }
  if (total_panels == 0) return;
  // Panels of all problems back to back; a range may span several problems. Walking the list
  // per range costs O(problems), small next to the panels' arithmetic.
  pool.ParallelFor(total_panels, [&](int64_t begin, int64_t end) {
    float* scratch =
        scratch_k > 0 ? PanelScratch(static_cast<size_t>(kMatmulPanelRows * scratch_k)) : nullptr;
    int64_t first = 0;
    for (const MatmulProblem& p : problems) {
      if (first >= end) break;
      if (p.m == 0) continue;
      const int64_t panels = (p.w.rows + kMatmulPanelRows - 1) / kMatmulPanelRows;
      const int64_t lo = begin > first ? begin : first;
      const int64_t hi = end < first + panels ? end : first + panels;
      if (lo < hi) {
        const MatmulArgs args{p.x.data(), p.m, p.w.cols, p.w,
                              RowBytes(p.w.format, p.w.cols), p.y.data(), p.w.rows};
        RunPanels(isa, args, lo - first, hi - first, scratch);
      }
      first += panels;
    }
  });
}

void Matmul(ThreadPool& pool, std::span<const float> x, int64_t m, const WeightView& w,
            std::span<float> y, Isa isa) {
  const MatmulOutput output{w, y};
  MatmulSameInput(pool, x, m, {&output, 1}, isa);
}

}  // namespace tessera::kernels::cpu
