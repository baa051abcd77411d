#include "kernels/cpu/gated_delta_rule.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/util/check.h"
#include "kernels/cpu/simd_avx2.h"
#include "kernels/cpu/simd_avx512.h"
#include "kernels/cpu/simd_scalar.h"

namespace tessera::kernels::cpu {
namespace {

struct GdnArgs {
  const float* q;  // [rows, h_k, d_k], stride q_stride
  const float* k;
  const float* v;  // [rows, h_v, d_v], stride v_stride
  const float* g;  // [rows, h_v]
  const float* beta;
  float* states;  // [num_slots, h_v, d_k, d_v]
  float* out;     // [rows, h_v, d_v]
  int64_t q_stride;
  int64_t k_stride;
  int64_t v_stride;
  int64_t out_stride;  // h_v * d_v
  int num_k_heads;
  int num_v_heads;
  int d_k;
  int d_v;
  GdnHeadMapping head_mapping;
  bool l2_normalize_qk;
  float l2_eps;
  float q_scale;
};

// Per-thread buffers of one (sequence, head) work item, grown to the largest shape seen so that
// steady-state steps do not allocate. Matrices are [kGdnChunkSize, ·] row-major.
struct GdnScratch {
  std::vector<float> qn, kn;              // q̂, k̂ [C, d_k]
  std::vector<float> knt;                 // k̂ᵀ [d_k, C]
  std::vector<float> kbg, w;              // β e^γ k̂ and W [C, d_k]
  std::vector<float> vb, vnew;            // β v and U, then V' [C, d_v]
  std::vector<float> amat, pmat;          // A and P [C, C]
  std::vector<float> tmat;                // T = (I + A)⁻¹ [C, C]
  std::vector<float> gamma, beta, decay;  // [C]
};

GdnScratch& Scratch(const GdnArgs& a) {
  thread_local GdnScratch scratch;
  constexpr size_t kC = kGdnChunkSize;
  const size_t dk = static_cast<size_t>(a.d_k);
  const size_t dv = static_cast<size_t>(a.d_v);
  auto grow = [](std::vector<float>& buffer, size_t size) {
    if (buffer.size() < size) buffer.resize(size);
  };
  for (std::vector<float>* b : {&scratch.qn, &scratch.kn, &scratch.knt, &scratch.kbg, &scratch.w}) {
    grow(*b, kC * dk);
  }
  grow(scratch.vb, kC * dv);
  grow(scratch.vnew, kC * dv);
  for (std::vector<float>* b : {&scratch.amat, &scratch.pmat, &scratch.tmat}) grow(*b, kC * kC);
  for (std::vector<float>* b : {&scratch.gamma, &scratch.beta, &scratch.decay}) grow(*b, kC);
  return scratch;
}

// The k head that serves value head h.
int KHead(const GdnArgs& a, int h) {
  return a.head_mapping == GdnHeadMapping::kGrouped ? h / (a.num_v_heads / a.num_k_heads)
                                                    : h % a.num_k_heads;
}

// State [d_k, d_v] of value head h of sequence s.
float* HeadState(const GdnArgs& a, const RecurrentSequence& s, int h) {
  const int64_t head_elements = static_cast<int64_t>(a.d_k) * a.d_v;
  return a.states + (s.state_slot * a.num_v_heads + h) * head_elements;
}

// out[i] = x[i] · factor with factor = scale / sqrt(Σ x² + eps) (Σ in f64, factor rounded to
// f32 once), or factor = scale when the norm is off.
void NormalizeScaled(const float* x, int d, bool normalize, float eps, float scale, float* out) {
  float factor = scale;
  if (normalize) {
    double sum = 0.0;
    for (int i = 0; i < d; ++i) sum += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    factor = static_cast<float>(static_cast<double>(scale) / std::sqrt(sum + eps));
  }
  for (int i = 0; i < d; ++i) out[i] = x[i] * factor;
}

// q̂ and k̂ of k head kh at `row`.
void NormalizeQk(const GdnArgs& a, int64_t row, int kh, float* qn, float* kn) {
  const int64_t offset = static_cast<int64_t>(kh) * a.d_k;
  NormalizeScaled(a.q + row * a.q_stride + offset, a.d_k, a.l2_normalize_qk, a.l2_eps, a.q_scale,
                  qn);
  NormalizeScaled(a.k + row * a.k_stride + offset, a.d_k, a.l2_normalize_qk, a.l2_eps, 1.0f, kn);
}

}  // namespace

namespace scalar {
// The chunked form uses the recurrent file's helpers: keep this order.
// clang-format off
#include "kernels/cpu/gated_delta_rule_impl.inc"
#include "kernels/cpu/gated_delta_chunk_impl.inc"
// clang-format on
}  // namespace scalar

#if TESSERA_X86_SIMD
TESSERA_BEGIN_TARGET_AVX2
namespace avx2 {
// The chunked form uses the recurrent file's helpers: keep this order.
// clang-format off
#include "kernels/cpu/gated_delta_rule_impl.inc"
#include "kernels/cpu/gated_delta_chunk_impl.inc"
// clang-format on
}  // namespace avx2
TESSERA_END_TARGET

TESSERA_BEGIN_TARGET_AVX512
namespace avx512 {
// The chunked form uses the recurrent file's helpers: keep this order.
// clang-format off
#include "kernels/cpu/gated_delta_rule_impl.inc"
#include "kernels/cpu/gated_delta_chunk_impl.inc"
// clang-format on
}  // namespace avx512
TESSERA_END_TARGET
#endif

namespace {

void CheckRows(std::span<const float> data, int64_t rows, int64_t stride, int64_t width,
               const char* message) {
  TESSERA_CHECK(stride >= width, message);
  TESSERA_CHECK(static_cast<int64_t>(data.size()) >= StridedExtent(rows, stride, width), message);
}

// Checks shapes; returns the number of rows the sequences cover.
int64_t ValidateGdn(const GatedDeltaRuleParams& p, const GdnInputs& in,
                    std::span<const RecurrentSequence> sequences, std::span<const float> states,
                    std::span<const float> out) {
  TESSERA_CHECK(p.num_k_heads > 0 && p.num_v_heads > 0 && p.num_v_heads % p.num_k_heads == 0,
                "GatedDeltaRule: num_v_heads must be a positive multiple of num_k_heads");
  TESSERA_CHECK(p.head_k_dim > 0 && p.head_k_dim <= kGdnMaxHeadDim && p.head_v_dim > 0 &&
                    p.head_v_dim <= kGdnMaxHeadDim,
                "GatedDeltaRule: head dims out of [1, kGdnMaxHeadDim]");
  const int64_t num_slots = static_cast<int64_t>(states.size()) / GdnStateElements(p);
  const int64_t rows =
      ValidateRecurrentSequences(sequences, num_slots, "GatedDeltaRule: bad sequence list");
  const int64_t qk_width = static_cast<int64_t>(p.num_k_heads) * p.head_k_dim;
  const int64_t v_width = static_cast<int64_t>(p.num_v_heads) * p.head_v_dim;
  CheckRows(in.q, rows, in.q_stride, qk_width, "GatedDeltaRule: q does not cover the rows");
  CheckRows(in.k, rows, in.k_stride, qk_width, "GatedDeltaRule: k does not cover the rows");
  CheckRows(in.v, rows, in.v_stride, v_width, "GatedDeltaRule: v does not cover the rows");
  CheckRows(in.g, rows, p.num_v_heads, p.num_v_heads, "GatedDeltaRule: g smaller than [rows, h_v]");
  CheckRows(in.beta, rows, p.num_v_heads, p.num_v_heads,
            "GatedDeltaRule: beta smaller than [rows, h_v]");
  CheckRows(out, rows, v_width, v_width, "GatedDeltaRule: out smaller than [rows, h_v, d_v]");
  return rows;
}

GdnArgs MakeArgs(const GatedDeltaRuleParams& p, const GdnInputs& in, std::span<float> states,
                 std::span<float> out) {
  return GdnArgs{in.q.data(),
                 in.k.data(),
                 in.v.data(),
                 in.g.data(),
                 in.beta.data(),
                 states.data(),
                 out.data(),
                 in.q_stride,
                 in.k_stride,
                 in.v_stride,
                 static_cast<int64_t>(p.num_v_heads) * p.head_v_dim,
                 p.num_k_heads,
                 p.num_v_heads,
                 p.head_k_dim,
                 p.head_v_dim,
                 p.head_mapping,
                 p.l2_normalize_qk,
                 p.l2_eps,
                 p.q_scale};
}

bool UseChunked(GdnForm form, const RecurrentSequence& s) {
  if (form == GdnForm::kAuto) return s.num_tokens >= kGdnMinChunkedTokens;
  return form == GdnForm::kChunked;
}

}  // namespace

void GatedDeltaRule(ThreadPool& pool, const GatedDeltaRuleParams& params, const GdnInputs& inputs,
                    std::span<const RecurrentSequence> sequences, std::span<float> states,
                    std::span<float> out, GdnForm form, Isa isa) {
  TESSERA_CHECK(IsaSupported(isa), "GatedDeltaRule: ISA not supported by this CPU");
  if (ValidateGdn(params, inputs, sequences, states, out) == 0) return;
  const GdnArgs args = MakeArgs(params, inputs, states, out);
  const int64_t heads = params.num_v_heads;
  // Work items: (sequence, value head), sequence-major; each owns its head's state and output
  // columns, so items never share writes.
  pool.ParallelFor(static_cast<int64_t>(sequences.size()) * heads, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const RecurrentSequence& s = sequences[static_cast<size_t>(item / heads)];
      const int h = static_cast<int>(item % heads);
      const bool chunked = UseChunked(form, s);
      switch (isa) {
#if TESSERA_X86_SIMD
        case Isa::kAvx512:
          chunked ? avx512::ChunkedHead(args, s, h) : avx512::RecurrentHead(args, s, h);
          break;
        case Isa::kAvx2:
          chunked ? avx2::ChunkedHead(args, s, h) : avx2::RecurrentHead(args, s, h);
          break;
#endif
        default:
          chunked ? scalar::ChunkedHead(args, s, h) : scalar::RecurrentHead(args, s, h);
      }
    }
  });
}

void GdnGates(std::span<const float> b, int64_t b_stride, std::span<const float> alpha,
              int64_t alpha_stride, std::span<const float> a_coef, std::span<const float> dt_bias,
              int64_t rows, std::span<float> g, std::span<float> beta) {
  const int64_t heads = static_cast<int64_t>(a_coef.size());
  TESSERA_CHECK(heads > 0 && static_cast<int64_t>(dt_bias.size()) == heads && rows >= 0,
                "GdnGates: a_coef and dt_bias must both hold h_v > 0 values");
  CheckRows(b, rows, b_stride, heads, "GdnGates: b does not cover [rows, h_v]");
  CheckRows(alpha, rows, alpha_stride, heads, "GdnGates: alpha does not cover [rows, h_v]");
  CheckRows(g, rows, heads, heads, "GdnGates: g smaller than [rows, h_v]");
  CheckRows(beta, rows, heads, heads, "GdnGates: beta smaller than [rows, h_v]");
  constexpr float kSoftplusThreshold = 20.0f;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      const float x = alpha[r * alpha_stride + h] + dt_bias[h];
      const float softplus = x > kSoftplusThreshold ? x : std::log1p(std::exp(x));
      g[r * heads + h] = a_coef[h] * softplus;
      beta[r * heads + h] = 1.0f / (1.0f + std::exp(-b[r * b_stride + h]));
    }
  }
}

}  // namespace tessera::kernels::cpu
