#include "worker/cpu/cpu_model_ops.h"

#include <algorithm>
#include <cmath>

#include "common/util/check.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/int8_matmul.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rms_norm.h"

namespace tessera::worker {
namespace {

namespace cpu = kernels::cpu;

void AddInPlace(std::span<float> x, std::span<const float> delta) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += delta[i];
}

}  // namespace

CpuModelOps::CpuModelOps(const model::ModelConfig& config, const ModelPlan* plan,
                         const HostModelWeights* weights, const Int8PackedWeights* packed,
                         const CpuKvPools* kv, const CpuRecurrentState* state,
                         const cpu::RopeTable* rope, cpu::ThreadPool* pool, cpu::Isa isa)
    : config_(config),
      plan_(plan),
      weights_(weights),
      packed_(packed),
      kv_(kv),
      state_(state),
      rope_(rope),
      pool_(pool),
      isa_(isa),
      buffers_(static_cast<size_t>(plan->activations.size())) {
  TESSERA_CHECK(static_cast<int>(weights->tensors.size()) == plan->weights.size(),
                "CpuModelOps: the weights were not bound from this plan's declaration");
}

int64_t CpuModelOps::Rows(ActId act) const {
  if (plan_->activations[act].rows == ActRows::kSamplingRows) {
    return static_cast<int64_t>(inputs_.logits_sequences.size());
  }
  return static_cast<int64_t>(inputs_.token_ids.size());
}

void CpuModelOps::BeginStep(const CpuStepInputs& inputs) {
  inputs_ = inputs;
  TESSERA_CHECK(static_cast<int64_t>(inputs.logits.size()) ==
                    Rows(plan_->logits) * Width(plan_->logits),
                "CpuModelOps: the logits span does not match the sampling rows");
  TESSERA_CHECK(plan_->num_linear_layers == 0 || inputs.recurrent.size() == inputs.sequences.size(),
                "CpuModelOps: a model with recurrent layers needs every sequence's state slot");
  for (ActId a = 0; a < plan_->activations.size(); ++a) {
    if (a == plan_->logits) continue;
    const int64_t size = Rows(a) * Width(a);
    if (static_cast<int64_t>(buffers_[a].size()) < size) buffers_[a].resize(size);
  }
}

std::span<float> CpuModelOps::Span(ActId act) {
  if (act == plan_->logits) return inputs_.logits;
  const size_t size = static_cast<size_t>(Rows(act) * Width(act));
  return std::span<float>(buffers_[static_cast<size_t>(act)]).first(size);
}

void CpuModelOps::Embed(WeightId table, ActId out) {
  cpu::EmbeddingLookup(Matrix(table), inputs_.token_ids, Span(out));
}

void CpuModelOps::RmsNorm(ActId in, WeightId weight, ActId out, int groups) {
  cpu::RmsNorm(Span(in), Values(weight), config_.rms_norm_eps, Rows(in) * groups, Span(out));
}

void CpuModelOps::Project(ActId in, std::initializer_list<Projection> outputs) {
  TESSERA_CHECK(outputs.size() <= cpu::kMaxMatmulOutputs, "Project: too many outputs");
  const size_t count = outputs.size();
  const std::span<const float> x = Span(in);
  if (packed_ != nullptr) {
    // Int8PackedWeights packed every projection (or refused the model); never fall back to f32.
    cpu::Int8MatmulOutput packed[cpu::kMaxMatmulOutputs];
    std::transform(outputs.begin(), outputs.end(), packed, [this](const Projection& p) {
      const cpu::Int8WeightView& view = (*packed_)[p.weight];
      TESSERA_CHECK(view.data != nullptr, "Project: int8 activations on an unpacked weight");
      return cpu::Int8MatmulOutput{view, Span(p.out)};
    });
    cpu::Int8MatmulSameInput(*pool_, x, Rows(in), {packed, count}, isa_);
    return;
  }
  cpu::MatmulOutput exact[cpu::kMaxMatmulOutputs];
  std::transform(outputs.begin(), outputs.end(), exact, [this](const Projection& p) {
    return cpu::MatmulOutput{Matrix(p.weight), Span(p.out)};
  });
  cpu::MatmulSameInput(*pool_, x, Rows(in), {exact, count}, isa_);
  for (const Projection& p : outputs) {  // an NVFP4 weight's per-tensor scale (1 otherwise)
    const float scale = (*weights_)[p.weight].tensor_scale;
    if (scale == 1.0f) continue;
    for (float& y : Span(p.out)) y *= scale;
  }
}

void CpuModelOps::AddBias(WeightId bias, ActId inout) {
  const std::span<const float> b = Values(bias);
  const std::span<float> x = Span(inout);
  for (int64_t r = 0; r < Rows(inout); ++r) AddInPlace(x.subspan(r * b.size(), b.size()), b);
}

void CpuModelOps::Rope(ActId inout, int num_heads) {
  cpu::ApplyRope(*rope_, inputs_.positions, num_heads, config_.head_dim, Span(inout));
}

void CpuModelOps::SigmoidMul(ActId gate, ActId inout) {
  const std::span<const float> g = Span(gate);
  const std::span<float> x = Span(inout);
  for (size_t i = 0; i < x.size(); ++i) x[i] *= 1.0f / (1.0f + std::exp(-g[i]));
}

void CpuModelOps::SwiGlu(ActId gate, ActId up, ActId out) {
  cpu::SwiGlu(Span(gate), Span(up), Span(out), isa_);
}

// (The cpu backend never concatenates weights, so it is given no [gate | up] rows; for the
// concept's sake it computes them as the device does without fusing: the product, then SwiGlu.)
void CpuModelOps::ProjectSwiGlu(ActId in, WeightId weight, ActId gate_up, ActId out) {
  Project(in, {{weight, gate_up}});
  const int64_t width = Width(out);
  const std::span<const float> rows = Span(gate_up);
  const std::span<float> result = Span(out);
  for (int64_t r = 0; r < Rows(out); ++r) {
    cpu::SwiGlu(rows.subspan(2 * r * width, width), rows.subspan((2 * r + 1) * width, width),
                result.subspan(r * width, width), isa_);
  }
}

void CpuModelOps::Add(ActId inout, ActId delta) { AddInPlace(Span(inout), Span(delta)); }

// The cpu backend gains nothing from fusing these: the device's fused launch in two steps.
void CpuModelOps::AddRmsNorm(ActId inout, ActId delta, WeightId weight, ActId out) {
  Add(inout, delta);
  RmsNorm(inout, weight, out, 1);
}

void CpuModelOps::GatherLastRows(ActId in, ActId out) {
  const int64_t width = Width(in);
  const std::span<const float> source = Span(in);
  const std::span<float> destination = Span(out);
  for (size_t r = 0; r < inputs_.logits_sequences.size(); ++r) {
    const cpu::AttentionSequence& s = inputs_.sequences[inputs_.logits_sequences[r]];
    const int64_t last_row = s.query_begin + s.num_query_tokens - 1;
    std::copy_n(source.begin() + last_row * width, width, destination.begin() + r * width);
  }
}

}  // namespace tessera::worker
