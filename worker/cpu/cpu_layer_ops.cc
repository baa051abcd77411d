// CpuModelOps' layer-kind ops: paged attention, the Gated DeltaNet mixer, MoE, and the column
// split the fused projections need (cpu_model_ops.h).
#include <algorithm>
#include <cmath>
#include <utility>

#include "common/util/check.h"
#include "kernels/cpu/causal_conv1d.h"
#include "kernels/cpu/gated_delta_rule.h"
#include "kernels/cpu/gated_rms_norm.h"
#include "worker/cpu/cpu_model_ops.h"

namespace tessera::worker {

namespace cpu = kernels::cpu;

void CpuModelOps::RotaryAttend(int kv_layer, ActId q, ActId k, ActId v, ActId out) {
  Rope(q, config_.num_heads);
  Rope(k, config_.num_kv_heads);
  const cpu::PagedAttentionParams params{
      .num_heads = config_.num_heads,
      .scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim)),
      .kv = kv_->shape};
  if (!kv_->k_half.empty()) {
    cpu::WriteKv(kv_->shape, inputs_.slots, Span(k), Span(v), kv_->k_half[kv_layer],
                 kv_->v_half[kv_layer]);
    cpu::PagedAttention(*pool_, params, Span(q), kv_->k_half[kv_layer], kv_->v_half[kv_layer],
                        inputs_.sequences, Span(out), isa_);
  } else {
    cpu::WriteKv(kv_->shape, inputs_.slots, Span(k), Span(v), kv_->k[kv_layer], kv_->v[kv_layer]);
    cpu::PagedAttention(*pool_, params, Span(q), kv_->k[kv_layer], kv_->v[kv_layer],
                        inputs_.sequences, Span(out), isa_);
  }
}

// (Given [q | k | v] rows only by a backend that concatenates weights, which this one does not.)
void CpuModelOps::RotaryAttendQkv(int kv_layer, ActId qkv, const QkvBiases& biases, ActId q,
                                  ActId k, ActId v, ActId out) {
  SplitHeads(qkv, 1, {{q, 0, Width(q)}, {k, 0, Width(k)}, {v, 0, Width(v)}});
  for (const auto& [bias, part] : {std::pair{biases.q, q}, {biases.k, k}, {biases.v, v}}) {
    if (Has(bias)) AddBias(bias, part);
  }
  RotaryAttend(kv_layer, q, k, v, out);
}

void CpuModelOps::SplitHeads(ActId in, int groups, std::initializer_list<SplitPart> parts) {
  int64_t group_width = 0;
  for (const SplitPart& p : parts) group_width += p.width;
  TESSERA_CHECK(group_width * groups == Width(in), "SplitHeads: parts do not tile the input row");
  const std::span<const float> source = Span(in);
  for (int64_t r = 0; r < Rows(in); ++r) {
    const float* row = source.data() + r * Width(in);
    for (int g = 0; g < groups; ++g) {
      for (const SplitPart& p : parts) {
        float* target = Span(p.out).data() + r * Width(p.out) + p.offset + g * p.width;
        std::copy_n(row, p.width, target);
        row += p.width;
      }
    }
  }
}

void CpuModelOps::LinearAttend(int linear_layer, const GdnOpWeights& w, const GdnOpActs& a) {
  const model::GdnDims& d = config_.hybrid->gdn;
  const int64_t channels = model::GdnConvChannels(d);
  const int64_t key_dim = model::GdnKeyDim(d);
  const int64_t rows = Rows(a.qkv);
  const cpu::CausalConvParams conv{.channels = channels, .kernel_size = d.conv_kernel,
                                   .apply_silu = true};
  cpu::CausalConv1d(*pool_, conv, Values(w.conv), Span(a.qkv), channels, inputs_.recurrent,
                    state_->conv[linear_layer], Span(a.conv), channels, isa_);
  cpu::GdnGates(Span(a.beta_in), d.num_v_heads, Span(a.alpha_in), d.num_v_heads, Values(w.a),
                Values(w.dt_bias), rows, Span(a.g), Span(a.beta));
  const cpu::GatedDeltaRuleParams rule{
      .num_k_heads = d.num_k_heads, .num_v_heads = d.num_v_heads,
      .head_k_dim = d.head_k_dim, .head_v_dim = d.head_v_dim,
      .head_mapping = d.head_order == model::GdnHeadOrder::kTiled ? cpu::GdnHeadMapping::kTiled
                                                                  : cpu::GdnHeadMapping::kGrouped,
      .l2_normalize_qk = true, .l2_eps = 1e-6f,
      .q_scale = 1.0f / std::sqrt(static_cast<float>(d.head_k_dim))};
  const std::span<const float> mixed = Span(a.conv);
  const cpu::GdnInputs inputs{.q = mixed, .q_stride = channels,
                              .k = mixed.subspan(key_dim), .k_stride = channels,
                              .v = mixed.subspan(2 * key_dim), .v_stride = channels,
                              .g = Span(a.g), .beta = Span(a.beta)};
  cpu::GatedDeltaRule(*pool_, rule, inputs, inputs_.recurrent, state_->ssm[linear_layer],
                      Span(a.out), cpu::GdnForm::kAuto, isa_);
  cpu::GatedRmsNorm(Span(a.out), Span(a.z), Values(w.norm), static_cast<float>(config_.rms_norm_eps),
                    rows * d.num_v_heads, Span(a.out), isa_);
}

void CpuModelOps::MoeFfn(ActId in, const MoeOpWeights& w, ActId out) {
  const model::MoeDims& m = *config_.hybrid->moe;
  const auto experts = [this](WeightId id) {
    const HostWeight& weight = (*weights_)[id];
    cpu::ExpertWeightsView view = weight.experts;
    view.output_scales = weight.expert_scales.empty() ? nullptr : weight.expert_scales.data();
    return view;
  };
  const auto scale = [this](WeightId id) { return Has(id) ? (*weights_)[id].tensor_scale : 1.0f; };
  const cpu::WeightView none{};
  cpu::ExpertWeightsView gate, up;
  if (w.gate_up_exps != kNoWeight) {  // fused: each expert's gate rows, then its up rows
    const cpu::ExpertWeightsView fused = experts(w.gate_up_exps);
    gate = fused;
    gate.rows = fused.rows / 2;
    gate.expert_rows = fused.rows;
    up = gate;
    up.first_row = gate.rows;
  } else {
    gate = experts(w.gate_exps);
    up = experts(w.up_exps);
  }
  cpu::MoeFfnWeights weights{.router = Matrix(w.router),
                             .gate = gate,
                             .up = up,
                             .down = experts(w.down_exps),
                             .shared_gate = Has(w.shared_gate) ? Matrix(w.shared_gate) : none,
                             .shared_up = Has(w.shared_up) ? Matrix(w.shared_up) : none,
                             .shared_down = Has(w.shared_down) ? Matrix(w.shared_down) : none,
                             .shared_expert_gate = Has(w.shared_expert_gate)
                                                       ? Matrix(w.shared_expert_gate)
                                                       : none,
                             .scales = {.router = scale(w.router),
                                        .shared_gate = scale(w.shared_gate),
                                        .shared_up = scale(w.shared_up),
                                        .shared_down = scale(w.shared_down),
                                        .shared_expert_gate = scale(w.shared_expert_gate)}};
  const cpu::MoeFfnConfig moe{.routing = {.num_experts = m.num_experts,
                                          .num_experts_used = m.num_experts_used,
                                          .normalize_weights = true},
                              .max_tokens_per_pass = 256};
  cpu::MoeFfn(*pool_, moe, weights, Span(in), Rows(in), &moe_workspace_, Span(out), isa_);
}

}  // namespace tessera::worker
