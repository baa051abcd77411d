// DeviceModelOps' layer-kind ops (device_model_ops.h): paged attention, the column split of the
// fused projections, the attention output gate, the Gated DeltaNet mixer and the MoE FFN. The
// cpu backend's twins are in worker/cpu/cpu_layer_ops.cc; each op here runs the same steps in
// the same order on the device kernels.
#include <algorithm>
#include <cmath>
#include <utility>
#include <variant>

#include "common/util/check.h"
#include "common/util/status_macros.h"
#include "worker/cuda/device_model_ops.h"

namespace tessera::worker {
using device::DataType;

void DeviceModelOps::RotaryAttend(int layer, ActId q, ActId k, ActId v, ActId out) {
  if (!status_.ok()) return;
  RopeKvWrite(layer, Buffer(q), Buffer(k), Buffer(v), Width(q), Width(k), q, Rows(k));
  Attention(layer, q, out);
}

// qkv rows are [q | k | v]: q is rotated into `q`, k in its row, and both go on from there.
void DeviceModelOps::RotaryAttendQkv(int layer, ActId qkv, const QkvBiases& biases, ActId q,
                                     ActId k, ActId v, ActId out) {
  if (!status_.ok()) return;
  const size_t element = ElementBytes(qkv);
  auto* row = static_cast<uint8_t*>(Buffer(qkv));
  RopeKvWrite(layer, row, row + Width(q) * element, row + (Width(q) + Width(k)) * element,
              Width(qkv), Width(qkv), q, Rows(qkv), biases);
  Attention(layer, q, out);
}

void DeviceModelOps::RopeKvWrite(int layer, const void* q_in, void* k, void* v,
                                 int64_t q_stride, int64_t kv_stride, ActId q_out, int tokens,
                                 const QkvBiases& biases) {
  if (!TokenWork()) return;
  const auto bias = [&](WeightId id) { return Has(id) ? weights_[id].data : nullptr; };
  Check(kernels_.RopeKvWrite(
      dtype_, {.style = config_.rope_neox ? cuda::RopeStyle::kNeox : cuda::RopeStyle::kNormal,
               .q_in = q_in, .q_out = Buffer(q_out), .k = k, .v = v,
               .q_stride = q_stride, .kv_stride = kv_stride,
               .q_bias = bias(biases.q), .k_bias = bias(biases.k), .v_bias = bias(biases.v),
               .k_pool = kv_.k[layer], .v_pool = kv_.v[layer],
               .positions = inputs_->device_positions(),
               .slot_mapping = inputs_->device_slot_mapping(),
               .cos_sin = weights_.rope_cos_sin, .max_positions = weights_.rope_positions,
               .num_tokens = tokens, .num_heads = config_.num_heads,
               .num_kv_heads = config_.num_kv_heads, .head_dim = config_.head_dim,
               .rope_dim = config_.rope_dim}));
}

// Paged attention of the step's rows of `q` (its K/V in the pool): decode rows, then prefill.
void DeviceModelOps::Attention(int layer, ActId q, ActId out) {
  if (!SequenceWork(/*tail=*/false)) return;
  const StepShape& shape = inputs_->shape();
  const size_t decode_bytes = size_t(shape.num_decode) * Width(q) * device::DataTypeBytes(dtype_);
  if (shape.num_decode > 0) DecodeAttention(layer, Buffer(q), Buffer(out));
  if (shape.num_prefill > 0) {
    PrefillAttention(layer, static_cast<const uint8_t*>(Buffer(q)) + decode_bytes,
                     static_cast<uint8_t*>(Buffer(out)) + decode_bytes);
  }
}

void DeviceModelOps::DecodeAttention(int layer, const void* q, void* out) {
  if (!status_.ok()) return;
  const cuda::PagedDecodeParams params{
      .num_seqs = inputs_->shape().num_decode,
      .num_heads = config_.num_heads,
      .num_kv_heads = config_.num_kv_heads,
      .block_size = kv_.block_size,
      .max_blocks_per_seq = attention_.table_stride,
      .max_context_len = std::max(attention_.decode_max_context, 1),
      .scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim)),
      .num_sms = options_.num_sms,
      .partition_size = options_.decode_partition,
      .max_num_seqs = options_.max_rows};
  Check(kernels_.DecodeAttention(dtype_, config_.head_dim, params, q, kv_.k[layer], kv_.v[layer],
                                 attention_.decode_tables, inputs_->device_decode_lens(),
                                 out, decode_workspace_.as<float>()));
}

void DeviceModelOps::PrefillAttention(int layer, const void* q, void* out) {
  if (!status_.ok()) return;
  const cuda::PagedPrefillParams params{
      .num_seqs = inputs_->shape().num_prefill,
      .num_heads = config_.num_heads,
      .num_kv_heads = config_.num_kv_heads,
      .block_size = kv_.block_size,
      .max_blocks_per_seq = attention_.table_stride,
      .max_query_len = std::max(attention_.prefill_max_query, 1),
      .scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim))};
  Check(kernels_.PrefillAttention(dtype_, config_.head_dim, params, q, kv_.k[layer],
                                  kv_.v[layer], attention_.prefill_tables,
                                  inputs_->device_prefill_query_start(),
                                  inputs_->device_prefill_lens(), out));
}

void DeviceModelOps::SplitHeads(ActId in, int groups, std::initializer_list<SplitPart> parts) {
  if (!TokenWork()) return;
  int64_t group_width = 0;
  for (const SplitPart& p : parts) group_width += p.width;
  TESSERA_CHECK(group_width * groups == Width(in), "SplitHeads: parts do not tile the input row");
  const size_t element = ElementBytes(in);
  int64_t part_begin = 0;  // the part's first column within a group
  for (const SplitPart& p : parts) {
    const auto* src = static_cast<const uint8_t*>(Buffer(in)) + part_begin * element;
    auto* dst = static_cast<uint8_t*>(Buffer(p.out)) + p.offset * element;
    Check(kernels_.CopyColumnGroups(dtype_, src, Width(in), group_width, dst, Width(p.out),
                                    p.width, Rows(in), groups, static_cast<int>(p.width)));
    part_begin += p.width;
  }
}

void DeviceModelOps::SigmoidMul(ActId gate, ActId inout) {
  if (!TokenWork()) return;
  Check(kernels_.SigmoidMul(dtype_, Buffer(gate), Buffer(inout),
                            int64_t{Rows(inout)} * Width(inout)));
}

// conv -> gates -> delta rule -> gated RMSNorm, as CpuModelOps::LinearAttend.
void DeviceModelOps::LinearAttend(int linear_layer, const GdnOpWeights& w, const GdnOpActs& a) {
  if (!SequenceWork(/*tail=*/false)) return;
  const model::GdnDims& d = config_.hybrid->gdn;
  const int channels = static_cast<int>(model::GdnConvChannels(d));
  const int64_t key_dim = model::GdnKeyDim(d);
  const int rows = Rows(a.qkv);
  const StepShape& shape = inputs_->shape();
  const int num_seqs = shape.num_decode + shape.num_prefill;
  const cuda::DeviceRecurrentSequence* sequences = inputs_->device_recurrent();
  TESSERA_CHECK(weights_[w.a].values != nullptr && weights_[w.dt_bias].values != nullptr,
                "LinearAttend: the gate constants were uploaded without their f32 values");
  Check(kernels_.CausalConv1d(dtype_, Buffer(a.qkv), channels, weights_[w.conv].data, sequences,
                              num_seqs, state_.conv[linear_layer], Buffer(a.conv), channels,
                              channels, d.conv_kernel));
  if (!status_.ok()) return;
  auto* g = static_cast<float*>(Buffer(a.g));
  auto* beta = static_cast<float*>(Buffer(a.beta));
  Check(kernels_.GdnGates(dtype_, Buffer(a.beta_in), Width(a.beta_in), Buffer(a.alpha_in),
                          Width(a.alpha_in), weights_[w.a].values, weights_[w.dt_bias].values,
                          rows, d.num_v_heads, g, beta));
  if (!status_.ok()) return;
  const cuda::GdnDeviceParams params{
      .num_k_heads = d.num_k_heads, .num_v_heads = d.num_v_heads,
      .head_k_dim = d.head_k_dim, .head_v_dim = d.head_v_dim,
      .head_mapping = d.head_order == model::GdnHeadOrder::kTiled ? cuda::GdnHeadMapping::kTiled
                                                                  : cuda::GdnHeadMapping::kGrouped,
      .l2_normalize_qk = true, .l2_eps = 1e-6f,
      .q_scale = 1.0f / std::sqrt(static_cast<float>(d.head_k_dim))};
  const auto* mixed = static_cast<const uint8_t*>(Buffer(a.conv));
  const size_t element = ElementBytes(a.conv);
  const GdnRuleInputs inputs{.q = mixed, .q_stride = channels,
                             .k = mixed + key_dim * element, .k_stride = channels,
                             .v = mixed + 2 * key_dim * element, .v_stride = channels,
                             .g = g, .beta = beta};
  Check(kernels_.GatedDeltaRule(dtype_, params, inputs, sequences, num_seqs,
                                state_.ssm[linear_layer], Buffer(a.out)));
  if (!status_.ok()) return;
  Check(kernels_.GatedRmsNorm(dtype_, Buffer(a.out), Buffer(a.z), Width(a.z),
                              weights_[w.norm].data, Buffer(a.out), rows, d.num_v_heads,
                              d.head_v_dim, static_cast<float>(config_.rms_norm_eps)));
}

// The shared expert of `in`'s rows into moe_.shared_out, and its gate logit into
// moe_.shared_logit when the layer has one.
void DeviceModelOps::SharedExpert(ActId in, const MoeOpWeights& w) {
  const int n = Rows(in);
  const DeviceWeight& gate = weights_[w.shared_gate];
  GemmRows(Buffer(in), n, gate, moe_.shared_gate, dtype_);
  GemmRows(Buffer(in), n, weights_[w.shared_up], moe_.shared_up, dtype_);
  if (!status_.ok()) return;
  Check(kernels_.SwiGlu(dtype_, moe_.shared_gate, moe_.shared_up, moe_.shared_gate, n,
                        static_cast<int>(gate.rows)));
  GemmRows(moe_.shared_gate, n, weights_[w.shared_down], moe_.shared_out, dtype_);
  if (Has(w.shared_expert_gate)) {
    GemmRows(Buffer(in), n, weights_[w.shared_expert_gate], moe_.shared_logit, DataType::kF32);
  }
}

// Rows [first_row, first_row + rows) of each expert's matrix in the stack `w` (rows 0: all).
MoeExpertWeights DeviceModelOps::ExpertWeights(const DeviceWeight& w, int first_row,
                                               int rows) const {
  MoeExpertWeights out;
  out.expert_rows = rows > 0 ? static_cast<int>(w.rows) : 0;
  if (w.packed) {
    out.packed = cuda::PackedExperts{.stack = *w.packed,
                                     .expert_rows = static_cast<int>(w.rows),
                                     .first_row = first_row,
                                     .expert_scales = w.expert_scales};
    return out;
  }
  out.dense = static_cast<const uint8_t*>(w.data) +
              static_cast<size_t>(first_row) * w.cols * device::DataTypeBytes(dtype_);
  return out;
}

// Router logits, routing + grouping, the routed experts, the shared expert, the combine:
// kernels/cpu/moe_ffn.h's steps on the device.
void DeviceModelOps::MoeFfn(ActId in, const MoeOpWeights& w, ActId out) {
  if (!TokenWork()) return;
  const model::MoeDims& m = *config_.hybrid->moe;
  const int n = Rows(in);
  const int k = m.num_experts_used;
  GemmRows(Buffer(in), n, weights_[w.router], moe_.logits, DataType::kF32);
  const bool shared = Has(w.shared_gate);
  if (shared) SharedExpert(in, w);
  if (!status_.ok()) return;
  Check(kernels_.MoeRouting(moe_.logits, n, m.num_experts, k, /*normalize=*/true,
                            moe_.expert_ids, moe_.weights, moe_.groups));
  if (!status_.ok()) return;
  const cuda::MoeGemmGroups groups{.offsets = moe_.groups.offsets,
                                   .row_tokens = moe_.groups.row_tokens,
                                   .tile_expert = moe_.groups.tile_expert,
                                   .tile_row0 = moe_.groups.tile_row0};
  MoeExpertsInputs experts{.x = Buffer(in), .gate_w = {}, .up_w = {},
                           .down_w = ExpertWeights(weights_[w.down_exps]), .gate = moe_.gate,
                           .up = moe_.up, .y = moe_.y, .num_tokens = n, .k = k,
                           .num_experts = m.num_experts, .hidden = config_.hidden_size, .ffn = 0};
  if (w.gate_up_exps != kNoWeight) {  // fused: each expert's gate rows, then its up rows
    const DeviceWeight& fused = weights_[w.gate_up_exps];
    experts.ffn = static_cast<int>(fused.rows / 2);
    experts.gate_w = ExpertWeights(fused, 0, experts.ffn);
    experts.up_w = ExpertWeights(fused, experts.ffn, experts.ffn);
  } else {
    experts.ffn = static_cast<int>(weights_[w.gate_exps].rows);
    experts.gate_w = ExpertWeights(weights_[w.gate_exps]);
    experts.up_w = ExpertWeights(weights_[w.up_exps]);
  }
  Check(kernels_.MoeExperts(dtype_, groups, experts));
  if (!status_.ok()) return;
  const bool shared_gate = shared && Has(w.shared_expert_gate);
  Check(kernels_.MoeCombine(dtype_, moe_.y, moe_.weights, moe_.groups.slot_rows,
                            shared ? moe_.shared_out : nullptr,
                            shared_gate ? moe_.shared_logit : nullptr, Buffer(out), n, k,
                            config_.hidden_size));
  // Tensor parallel: each rank combined its share of every expert's (and the shared expert's)
  // columns; one sum over the ranks completes the layer.
  if (weights_[w.down_exps].partial_sum && status_.ok()) SumOverRanks(out);
}

namespace {

// Carves typed arrays out of one allocation (256-byte aligned), first measuring, then placing.
class Carver {
 public:
  explicit Carver(uint8_t* base) : base_(base) {}
  template <typename T>
  T* Take(int64_t count) {
    const size_t offset = used_;
    used_ = (used_ + static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(T) + 255) / 256 * 256;
    return base_ == nullptr ? nullptr : reinterpret_cast<T*>(base_ + offset);
  }
  void* TakeBytes(int64_t count, size_t element) {
    return Take<uint8_t>(count * static_cast<int64_t>(element));
  }
  size_t used() const { return used_; }

 private:
  uint8_t* base_;
  size_t used_ = 0;
};

// The widest expert and shared-expert FFN of a hybrid plan's MoE layers.
std::pair<int64_t, int64_t> MoeFfnWidths(const ModelPlan& plan, const DeviceModelWeights& w) {
  int64_t expert = 1, shared = 1;
  if (const auto* hybrid = std::get_if<HybridPlan>(&plan.body)) {
    for (const HybridLayerIds& layer : hybrid->layers) {
      if (layer.moe.router == kNoWeight) continue;
      expert = std::max(expert, layer.moe.gate_up_exps != kNoWeight
                                    ? w[layer.moe.gate_up_exps].rows / 2
                                    : w[layer.moe.gate_exps].rows);
      if (layer.moe.shared_gate != kNoWeight && w[layer.moe.shared_gate].present()) {
        shared = std::max(shared, w[layer.moe.shared_gate].rows);
      }
    }
  }
  return {expert, shared};
}

}  // namespace

absl::Status DeviceModelOps::AllocateMoeWorkspace() {
  if (!config_.hybrid.has_value() || !config_.hybrid->moe.has_value()) return absl::OkStatus();
  const model::MoeDims& m = *config_.hybrid->moe;
  const std::pair<int64_t, int64_t> widths = MoeFfnWidths(plan_, weights_);
  const int64_t ffn = widths.first, shared_ffn = widths.second;
  const int64_t tokens = options_.max_tokens;
  const int64_t slots = tokens * m.num_experts_used;
  const int64_t tiles = cuda::MoeMaxRowTiles(static_cast<int>(slots), m.num_experts);
  const size_t element = device::DataTypeBytes(dtype_);
  const int64_t hidden = config_.hidden_size;
  auto carve = [&](Carver& c, DeviceMoeWorkspace* out) {
    out->logits = c.Take<float>(tokens * m.num_experts);
    out->shared_logit = c.Take<float>(tokens);
    out->expert_ids = c.Take<int32_t>(slots);
    out->weights = c.Take<float>(slots);
    out->groups = {.offsets = c.Take<int32_t>(m.num_experts + 1),
                   .row_tokens = c.Take<int32_t>(slots), .slot_rows = c.Take<int32_t>(slots),
                   .tile_expert = c.Take<int32_t>(tiles), .tile_row0 = c.Take<int32_t>(tiles)};
    out->gate = c.TakeBytes(slots * ffn, element);
    out->up = c.TakeBytes(slots * ffn, element);
    out->y = c.Take<float>(slots * hidden);
    out->shared_gate = c.TakeBytes(tokens * shared_ffn, element);
    out->shared_up = c.TakeBytes(tokens * shared_ffn, element);
    out->shared_out = c.TakeBytes(tokens * hidden, element);
  };
  Carver measure(nullptr);
  carve(measure, &moe_);
  TESSERA_ASSIGN_OR_RETURN(moe_.memory, device::DeviceMemory::Allocate(runtime_, measure.used()));
  Carver place(moe_.memory.as<uint8_t>());
  carve(place, &moe_);
  activation_bytes_ += static_cast<int64_t>(moe_.memory.bytes());
  return absl::OkStatus();
}

}  // namespace tessera::worker
