#include "worker/cpu/cpu_llama_ops.h"

#include <algorithm>
#include <cmath>

#include "common/util/check.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rms_norm.h"

namespace tessera::worker {
namespace {

namespace cpu = kernels::cpu;

constexpr int kNumBuffers = static_cast<int>(LlamaActivation::kLogits);

void AddInPlace(std::span<float> x, std::span<const float> delta) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += delta[i];
}

CpuMatmulWeight Matmul(const cpu::WeightView& exact, const cpu::Int8WeightView* packed) {
  return {&exact, packed};
}

}  // namespace

CpuLlamaOps::CpuLlamaOps(const model::ModelConfig& config, const LlamaWeights* weights,
                         const Int8PackedWeights* packed, const CpuKvPools* kv,
                         const cpu::RopeTable* rope, cpu::ThreadPool* pool, cpu::Isa isa)
    : config_(config),
      weights_(weights),
      packed_(packed),
      kv_(kv),
      rope_(rope),
      pool_(pool),
      isa_(isa),
      buffers_(kNumBuffers) {
  static const Int8LayerWeights kUnpacked;
  static const cpu::Int8WeightView kNoView;
  for (int l = 0; l < config.num_layers; ++l) {
    const LlamaLayerWeights& w = weights->layers[l];
    const Int8LayerWeights& p = packed ? packed->layer(l) : kUnpacked;
    layers_.push_back({.attn_norm = w.attn_norm, .ffn_norm = w.ffn_norm, .bq = w.bq,
                       .bk = w.bk, .bv = w.bv, .q_norm = w.q_norm, .k_norm = w.k_norm,
                       .wq = Matmul(w.wq, &p.wq), .wk = Matmul(w.wk, &p.wk),
                       .wv = Matmul(w.wv, &p.wv), .wo = Matmul(w.wo, &p.wo),
                       .w_gate = Matmul(w.w_gate, &p.w_gate), .w_up = Matmul(w.w_up, &p.w_up),
                       .w_down = Matmul(w.w_down, &p.w_down)});
  }
  output_ = Matmul(weights->output, packed ? &packed->output() : &kNoView);
}

int64_t CpuLlamaOps::Rows(Act act) const {
  if (act == Act::kFinal || act == Act::kLogits) {
    return static_cast<int64_t>(inputs_.logits_sequences.size());
  }
  return static_cast<int64_t>(inputs_.token_ids.size());
}

int64_t CpuLlamaOps::Width(Act act) const {
  const int64_t q_dim = int64_t{config_.num_heads} * config_.head_dim;
  switch (act) {
    case Act::kX: case Act::kNormed: case Act::kProjected: case Act::kFinal:
      return config_.hidden_size;
    case Act::kQ: case Act::kAttention: return q_dim;
    case Act::kK: case Act::kV: return kv_->shape.RowElements();
    case Act::kGate: case Act::kUp: return config_.ffn_size;
    case Act::kLogits: return config_.vocab_size;
  }
  return 0;
}

void CpuLlamaOps::BeginStep(const CpuStepInputs& inputs) {
  inputs_ = inputs;
  TESSERA_CHECK(static_cast<int64_t>(inputs.logits.size()) == Rows(Act::kLogits) * Width(Act::kLogits),
                "CpuLlamaOps: the logits span does not match the sampling rows");
  for (int a = 0; a < kNumBuffers; ++a) {
    const int64_t size = Rows(static_cast<Act>(a)) * Width(static_cast<Act>(a));
    if (static_cast<int64_t>(buffers_[a].size()) < size) buffers_[a].resize(size);
  }
}

std::span<float> CpuLlamaOps::Span(Act act) {
  const size_t size = static_cast<size_t>(Rows(act) * Width(act));
  if (act == Act::kLogits) return inputs_.logits;
  return std::span<float>(buffers_[static_cast<int>(act)]).first(size);
}

void CpuLlamaOps::Embed(Act out) { cpu::EmbeddingLookup(weights_->token_embd, inputs_.token_ids, Span(out)); }

void CpuLlamaOps::RmsNorm(Act in, std::span<const float> weight, Act out, int groups) {
  cpu::RmsNorm(Span(in), weight, config_.rms_norm_eps, Rows(in) * groups, Span(out));
}

void CpuLlamaOps::Project(Act in, std::initializer_list<Projection> outputs) {
  TESSERA_CHECK(outputs.size() <= cpu::kMaxMatmulOutputs, "Project: too many outputs");
  const size_t count = outputs.size();
  const std::span<const float> x = Span(in);
  if (packed_ != nullptr) {
    // Int8PackedWeights packed every projection (or refused the model); never fall back to f32.
    for (const Projection& p : outputs) {
      TESSERA_CHECK(p.weight.packed->data != nullptr, "Project: int8 activations on an unpacked weight");
    }
    cpu::Int8MatmulOutput packed[cpu::kMaxMatmulOutputs];
    std::transform(outputs.begin(), outputs.end(), packed, [this](const Projection& p) {
      return cpu::Int8MatmulOutput{*p.weight.packed, Span(p.out)};
    });
    cpu::Int8MatmulSameInput(*pool_, x, Rows(in), {packed, count}, isa_);
    return;
  }
  cpu::MatmulOutput exact[cpu::kMaxMatmulOutputs];
  std::transform(outputs.begin(), outputs.end(), exact, [this](const Projection& p) {
    return cpu::MatmulOutput{*p.weight.exact, Span(p.out)};
  });
  cpu::MatmulSameInput(*pool_, x, Rows(in), {exact, count}, isa_);
}

void CpuLlamaOps::AddBias(std::span<const float> bias, Act inout) {
  const std::span<float> x = Span(inout);
  for (int64_t r = 0; r < Rows(inout); ++r) AddInPlace(x.subspan(r * bias.size(), bias.size()), bias);
}

void CpuLlamaOps::Rope(Act inout, int num_heads) {
  cpu::ApplyRope(*rope_, inputs_.positions, num_heads, config_.head_dim, Span(inout));
}

void CpuLlamaOps::Attend(int layer, Act q, Act k, Act v, Act out) {
  const cpu::PagedAttentionParams params{
      .num_heads = config_.num_heads,
      .scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim)),
      .kv = kv_->shape};
  if (!kv_->k_half.empty()) {
    cpu::WriteKv(kv_->shape, inputs_.slots, Span(k), Span(v), kv_->k_half[layer], kv_->v_half[layer]);
    cpu::PagedAttention(*pool_, params, Span(q), kv_->k_half[layer], kv_->v_half[layer],
                        inputs_.sequences, Span(out), isa_);
  } else {
    cpu::WriteKv(kv_->shape, inputs_.slots, Span(k), Span(v), kv_->k[layer], kv_->v[layer]);
    cpu::PagedAttention(*pool_, params, Span(q), kv_->k[layer], kv_->v[layer], inputs_.sequences,
                        Span(out), isa_);
  }
}

void CpuLlamaOps::SwiGlu(Act gate, Act up, Act out) {
  cpu::SwiGlu(Span(gate), Span(up), Span(out), isa_);
}

void CpuLlamaOps::Add(Act inout, Act delta) { AddInPlace(Span(inout), Span(delta)); }

void CpuLlamaOps::GatherLastRows(Act in, Act out) {
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
