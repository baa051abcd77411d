#include "kernels/cpu/moe_ffn.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/util/check.h"
#include "kernels/cpu/activations.h"

namespace tessera::kernels::cpu {
namespace {

// The sizes of one pass over n tokens.
struct PassDims {
  int64_t n = 0;  // tokens in the pass
  int64_t k = 0;  // experts per token
  int64_t hidden = 0;
  int64_t expert_ffn = 0;
  int64_t shared_ffn = 0;  // 0 without a shared expert
  int64_t num_experts = 0;
  int64_t rows() const { return n * k; }
};

void CheckMatrix(const WeightView& w, int64_t rows, int64_t cols, const char* message) {
  TESSERA_CHECK(w.data != nullptr && w.rows == rows && w.cols == cols &&
                    MatmulSupportsFormat(w.format) && cols % FormatBlockElements(w.format) == 0,
                message);
}

void CheckExperts(const ExpertWeightsView& w, int64_t num_experts, int64_t rows, int64_t cols,
                  const char* message) {
  TESSERA_CHECK(w.num_experts == num_experts, message);
  // The stack as one matrix [num_experts * rows, cols]: same bytes, same checks.
  CheckMatrix(WeightView{w.format, w.data, w.num_experts * w.rows, w.cols}, num_experts * rows,
              cols, message);
  TESSERA_CHECK(w.rows == rows && rows >= 1, message);
}

void Resize(AlignedVector<float>& v, int64_t size) {
  if (static_cast<int64_t>(v.size()) < size) v.resize(static_cast<size_t>(size));
}

void SizeWorkspace(const PassDims& d, MoeFfnWorkspace* ws) {
  Resize(ws->logits, d.n * d.num_experts);
  Resize(ws->shared_logit, d.n);
  if (static_cast<int64_t>(ws->expert_ids.size()) < d.rows()) {
    ws->expert_ids.resize(static_cast<size_t>(d.rows()));
    ws->weights.resize(static_cast<size_t>(d.rows()));
  }
  Resize(ws->rows_in, d.rows() * d.hidden);
  Resize(ws->rows_gate, d.rows() * d.expert_ffn);
  Resize(ws->rows_up, d.rows() * d.expert_ffn);
  Resize(ws->rows_out, d.rows() * d.hidden);
  Resize(ws->shared_gate, d.n * d.shared_ffn);
  Resize(ws->shared_up, d.n * d.shared_ffn);
  Resize(ws->shared_out, d.n * d.hidden);
  ws->problems.reserve(static_cast<size_t>(2 * d.num_experts + 2));
}

std::span<float> Rows(AlignedVector<float>& v, int64_t first_row, int64_t num_rows, int64_t width) {
  return {v.data() + first_row * width, static_cast<size_t>(num_rows * width)};
}

// out *= scale, unless it is 1 (then nothing is touched: the bits of an unscaled model stay).
void Scale(std::span<float> out, float scale) {
  if (scale == 1.0f) return;
  for (float& v : out) v *= scale;
}

// Each grouped row of `rows` [n * k, width] times its expert's output scale (none: nothing).
void ScaleGroups(ThreadPool& pool, const ExpertWeightsView& w, const PassDims& d,
                 const std::vector<int32_t>& offsets, AlignedVector<float>& rows, int64_t width) {
  if (w.output_scales == nullptr) return;
  pool.ParallelFor(d.num_experts, [&](int64_t begin, int64_t end) {
    for (int64_t e = begin; e < end; ++e) {
      Scale(Rows(rows, offsets[e], offsets[e + 1] - offsets[e], width), w.output_scales[e]);
    }
  });
}

// Phase 1: everything that reads x directly, in one parallel region.
void ProjectTokens(ThreadPool& pool, const MoeFfnWeights& w, const PassDims& d,
                   std::span<const float> x, MoeFfnWorkspace* ws, Isa isa) {
  auto& problems = ws->problems;
  problems.clear();
  problems.push_back({x, d.n, w.router, Rows(ws->logits, 0, d.n, d.num_experts)});
  if (w.has_shared_expert()) {
    problems.push_back({x, d.n, w.shared_gate, Rows(ws->shared_gate, 0, d.n, d.shared_ffn)});
    problems.push_back({x, d.n, w.shared_up, Rows(ws->shared_up, 0, d.n, d.shared_ffn)});
    if (w.has_shared_expert_gate()) {
      problems.push_back({x, d.n, w.shared_expert_gate, Rows(ws->shared_logit, 0, d.n, 1)});
    }
  }
  MatmulMany(pool, problems, isa);
  Scale(Rows(ws->logits, 0, d.n, d.num_experts), w.scales.router);
  if (w.has_shared_expert()) {
    Scale(Rows(ws->shared_gate, 0, d.n, d.shared_ffn), w.scales.shared_gate);
    Scale(Rows(ws->shared_up, 0, d.n, d.shared_ffn), w.scales.shared_up);
    if (w.has_shared_expert_gate()) Scale(Rows(ws->shared_logit, 0, d.n, 1), w.scales.shared_expert_gate);
  }
}

// Phase 2: per-token routing (independent rows, so split across threads), then the grouping.
void RouteAndGroup(ThreadPool& pool, const MoeRoutingConfig& config, const PassDims& d,
                   MoeFfnWorkspace* ws, Isa isa) {
  const int64_t e = d.num_experts;
  const int64_t k = d.k;
  pool.ParallelFor(d.n, [&](int64_t begin, int64_t end) {
    RouteTokens(config, Rows(ws->logits, begin, end - begin, e), end - begin,
                {ws->expert_ids.data() + begin * k, static_cast<size_t>((end - begin) * k)},
                {ws->weights.data() + begin * k, static_cast<size_t>((end - begin) * k)}, isa);
  });
  GroupByExpert({ws->expert_ids.data(), static_cast<size_t>(d.rows())}, d.n, static_cast<int>(k),
                static_cast<int>(e), &ws->groups);
}

// Phase 3: row i of rows_in <- x[row_tokens[i]], so each group is one contiguous block.
void GatherRows(ThreadPool& pool, const PassDims& d, std::span<const float> x,
                MoeFfnWorkspace* ws) {
  const int64_t h = d.hidden;
  pool.ParallelFor(d.rows(), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t token = ws->groups.row_tokens[row];
      std::memcpy(ws->rows_in.data() + row * h, x.data() + token * h,
                  static_cast<size_t>(h) * sizeof(float));
    }
  });
}

// Phase 4: gate and up of every expert with rows, one matmul each over its whole group.
void ProjectGateUp(ThreadPool& pool, const MoeFfnWeights& w, const PassDims& d, MoeFfnWorkspace* ws,
                   Isa isa) {
  auto& problems = ws->problems;
  problems.clear();
  const std::vector<int32_t>& offsets = ws->groups.offsets;
  for (int64_t e = 0; e < d.num_experts; ++e) {
    const int64_t first = offsets[e];
    const int64_t count = offsets[e + 1] - first;
    if (count == 0) continue;  // an expert no token chose costs nothing
    const std::span<const float> in = Rows(ws->rows_in, first, count, d.hidden);
    problems.push_back(
        {in, count, w.gate.Expert(e), Rows(ws->rows_gate, first, count, d.expert_ffn)});
    problems.push_back({in, count, w.up.Expert(e), Rows(ws->rows_up, first, count, d.expert_ffn)});
  }
  MatmulMany(pool, problems, isa);
  ScaleGroups(pool, w.gate, d, offsets, ws->rows_gate, d.expert_ffn);
  ScaleGroups(pool, w.up, d, offsets, ws->rows_up, d.expert_ffn);
}

// Phase 5: gate <- silu(gate) * up over the routed rows, then the shared expert's rows.
void ApplySwiGlu(ThreadPool& pool, const PassDims& d, MoeFfnWorkspace* ws, Isa isa) {
  const int64_t routed = d.rows();
  const int64_t shared = d.shared_ffn > 0 ? d.n : 0;
  pool.ParallelFor(routed + shared, [&](int64_t begin, int64_t end) {
    if (begin < routed) {
      const int64_t hi = end < routed ? end : routed;
      const auto gate = Rows(ws->rows_gate, begin, hi - begin, d.expert_ffn);
      SwiGlu(gate, Rows(ws->rows_up, begin, hi - begin, d.expert_ffn), gate, isa);
    }
    if (end > routed) {
      const int64_t lo = (begin > routed ? begin : routed) - routed;
      const auto gate = Rows(ws->shared_gate, lo, end - routed - lo, d.shared_ffn);
      SwiGlu(gate, Rows(ws->shared_up, lo, end - routed - lo, d.shared_ffn), gate, isa);
    }
  });
}

// Phase 6: down of every expert with rows over its group, and the shared expert's down.
void ProjectDown(ThreadPool& pool, const MoeFfnWeights& w, const PassDims& d, MoeFfnWorkspace* ws,
                 Isa isa) {
  auto& problems = ws->problems;
  problems.clear();
  const std::vector<int32_t>& offsets = ws->groups.offsets;
  for (int64_t e = 0; e < d.num_experts; ++e) {
    const int64_t first = offsets[e];
    const int64_t count = offsets[e + 1] - first;
    if (count == 0) continue;
    problems.push_back({Rows(ws->rows_gate, first, count, d.expert_ffn), count, w.down.Expert(e),
                        Rows(ws->rows_out, first, count, d.hidden)});
  }
  if (w.has_shared_expert()) {
    problems.push_back({Rows(ws->shared_gate, 0, d.n, d.shared_ffn), d.n, w.shared_down,
                        Rows(ws->shared_out, 0, d.n, d.hidden)});
  }
  MatmulMany(pool, problems, isa);
  ScaleGroups(pool, w.down, d, offsets, ws->rows_out, d.hidden);
  if (w.has_shared_expert()) Scale(Rows(ws->shared_out, 0, d.n, d.hidden), w.scales.shared_down);
}

// Phase 7: each token's terms added in an order fixed by the token alone (header comment).
void Combine(ThreadPool& pool, const MoeFfnWeights& w, const PassDims& d, MoeFfnWorkspace* ws,
             std::span<float> out) {
  const int64_t h = d.hidden;
  const int64_t k = d.k;
  pool.ParallelFor(d.n, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* o = out.data() + t * h;
      const int32_t* slot_rows = ws->groups.slot_rows.data() + t * k;
      const float* weights = ws->weights.data() + t * k;
      const float* y = ws->rows_out.data() + slot_rows[0] * h;
      for (int64_t i = 0; i < h; ++i) o[i] = weights[0] * y[i];
      for (int64_t r = 1; r < k; ++r) {
        y = ws->rows_out.data() + slot_rows[r] * h;
        const float weight = weights[r];
        for (int64_t i = 0; i < h; ++i) o[i] += weight * y[i];
      }
      if (!w.has_shared_expert()) continue;
      const float gate =
          w.has_shared_expert_gate() ? 1.0f / (1.0f + std::exp(-ws->shared_logit[t])) : 1.0f;
      const float* s = ws->shared_out.data() + t * h;
      for (int64_t i = 0; i < h; ++i) o[i] += gate * s[i];
    }
  });
}

void RunPass(ThreadPool& pool, const MoeFfnConfig& config, const MoeFfnWeights& w,
             const PassDims& d, std::span<const float> x, MoeFfnWorkspace* ws, std::span<float> out,
             Isa isa) {
  SizeWorkspace(d, ws);
  ProjectTokens(pool, w, d, x, ws, isa);
  RouteAndGroup(pool, config.routing, d, ws, isa);
  GatherRows(pool, d, x, ws);
  ProjectGateUp(pool, w, d, ws, isa);
  ApplySwiGlu(pool, d, ws, isa);
  ProjectDown(pool, w, d, ws, isa);
  Combine(pool, w, d, ws, out);
}

}  // namespace

WeightView ExpertWeightsView::Expert(int64_t e) const {
  TESSERA_CHECK(e >= 0 && e < num_experts, "ExpertWeightsView: expert index out of range");
  const auto* base = static_cast<const uint8_t*>(data);
  const int64_t row = e * (expert_rows > 0 ? expert_rows : rows) + first_row;
  return WeightView{format, base + static_cast<size_t>(row) * RowBytes(format, cols), rows, cols};
}

void CheckMoeFfnWeights(const MoeFfnConfig& config, const MoeFfnWeights& w) {
  CheckMoeRoutingConfig(config.routing);
  TESSERA_CHECK(config.max_tokens_per_pass >= 1, "MoeFfn: max_tokens_per_pass must be >= 1");
  const int64_t e = config.routing.num_experts;
  const int64_t hidden = w.router.cols;
  const int64_t ffn = w.gate.rows;
  TESSERA_CHECK(hidden >= 1, "MoeFfn: hidden (ffn_gate_inp cols) must be >= 1");
  CheckMatrix(w.router, e, hidden, "MoeFfn: ffn_gate_inp must be [num_experts, hidden]");
  CheckExperts(w.gate, e, ffn, hidden, "MoeFfn: ffn_gate_exps must be [E, expert_ffn, hidden]");
  CheckExperts(w.up, e, ffn, hidden, "MoeFfn: ffn_up_exps must be [E, expert_ffn, hidden]");
  CheckExperts(w.down, e, hidden, ffn, "MoeFfn: ffn_down_exps must be [E, hidden, expert_ffn]");
  if (!w.has_shared_expert()) {
    TESSERA_CHECK(
        w.shared_up.data == nullptr && w.shared_down.data == nullptr && !w.has_shared_expert_gate(),
        "MoeFfn: shared expert tensors given without ffn_gate_shexp");
    return;
  }
  const int64_t shared_ffn = w.shared_gate.rows;
  TESSERA_CHECK(shared_ffn >= 1, "MoeFfn: ffn_gate_shexp must have rows");
  CheckMatrix(w.shared_gate, shared_ffn, hidden, "MoeFfn: ffn_gate_shexp must be [ffn, hidden]");
  CheckMatrix(w.shared_up, shared_ffn, hidden, "MoeFfn: ffn_up_shexp must be [ffn, hidden]");
  CheckMatrix(w.shared_down, hidden, shared_ffn, "MoeFfn: ffn_down_shexp must be [hidden, ffn]");
  if (w.has_shared_expert_gate()) {
    CheckMatrix(w.shared_expert_gate, 1, hidden, "MoeFfn: ffn_gate_inp_shexp must be [1, hidden]");
  }
}

void MoeFfn(ThreadPool& pool, const MoeFfnConfig& config, const MoeFfnWeights& weights,
            std::span<const float> x, int64_t num_tokens, MoeFfnWorkspace* workspace,
            std::span<float> out, Isa isa) {
  CheckMoeFfnWeights(config, weights);
  TESSERA_CHECK(IsaSupported(isa), "MoeFfn: ISA not supported by this CPU");
  TESSERA_CHECK(workspace != nullptr && num_tokens >= 0, "MoeFfn: null workspace or negative n");
  const int64_t hidden = weights.router.cols;
  const int64_t size = num_tokens * hidden;
  TESSERA_CHECK(static_cast<int64_t>(x.size()) >= size && static_cast<int64_t>(out.size()) >= size,
                "MoeFfn: x or out smaller than [num_tokens, hidden]");
  const auto x_begin = reinterpret_cast<uintptr_t>(x.data());
  const auto out_begin = reinterpret_cast<uintptr_t>(out.data());
  const auto bytes = static_cast<uintptr_t>(size) * sizeof(float);
  TESSERA_CHECK(size == 0 || out_begin + bytes <= x_begin || x_begin + bytes <= out_begin,
                "MoeFfn: x and out overlap");
  PassDims d;
  d.k = config.routing.num_experts_used;
  d.hidden = hidden;
  d.expert_ffn = weights.gate.rows;
  d.shared_ffn = weights.has_shared_expert() ? weights.shared_gate.rows : 0;
  d.num_experts = config.routing.num_experts;
  for (int64_t t0 = 0; t0 < num_tokens; t0 += config.max_tokens_per_pass) {
    d.n =
        num_tokens - t0 < config.max_tokens_per_pass ? num_tokens - t0 : config.max_tokens_per_pass;
    RunPass(pool, config, weights, d, x.subspan(t0 * hidden, d.n * hidden), workspace,
            out.subspan(t0 * hidden, d.n * hidden), isa);
  }
}

}  // namespace tessera::kernels::cpu
