#include "worker/cpu/cpu_llama_runner.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/util/absl_compat.h"
#include "common/util/check.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rms_norm.h"

namespace tessera::worker {
namespace {

namespace cpu = kernels::cpu;

void Resize(cpu::AlignedVector<float>& buffer, int64_t size) {
  if (static_cast<int64_t>(buffer.size()) < size) buffer.resize(size);
}

void AddInPlace(std::span<float> x, std::span<const float> delta) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += delta[i];
}

// x [m, width] += bias [width] on every row.
void AddBias(std::span<const float> bias, int64_t m, std::span<float> x) {
  if (bias.empty()) return;
  for (int64_t r = 0; r < m; ++r) AddInPlace(x.subspan(r * bias.size(), bias.size()), bias);
}

absl::Status SequenceError(size_t index, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("batch[", index, "]: ", what));
}

}  // namespace

cpu::RopeParams RopeParamsForModel(const model::ModelConfig& config,
                                   std::span<const float> freq_factors) {
  TESSERA_CHECK(freq_factors.empty() ||
                    static_cast<int>(freq_factors.size()) == config.rope_dim / 2,
                "RopeParamsForModel: freq_factors must hold rope_dim / 2 values");
  const model::RopeScaling& scaling = config.rope_scaling;
  cpu::RopeParams p{.rope_dim = config.rope_dim,
                    .mode = config.rope_neox ? cpu::RopeMode::kNeox : cpu::RopeMode::kNormal,
                    .theta_base = static_cast<float>(config.rope_theta),
                    .original_context_length = scaling.original_context_length,
                    .beta_fast = static_cast<float>(scaling.yarn_beta_fast),
                    .beta_slow = static_cast<float>(scaling.yarn_beta_slow),
                    .freq_factors = {freq_factors.begin(), freq_factors.end()}};
  // llama.cpp keeps the factor as f32 and inverts it in f32 (rope_freq_scale_train).
  if (scaling.type != model::RopeScalingType::kNone) {
    p.freq_scale = 1.0f / static_cast<float>(scaling.factor);
  }
  // llama_context: ext_factor defaults to 1 for YaRN, 0 otherwise. With YaRN it sets
  // attn_factor = get_mscale(factor) / (1 + 0.1 ln factor) — ~1, cancelling the mscale that
  // ggml's rope_yarn applies on top (llama.cpp PR 17945) — which we evaluate the same way in f32
  // so the product matches to the bit; then both multiply by rope.scaling.attn_factor.
  p.attn_factor = 1.0f;
  if (scaling.type == model::RopeScalingType::kYarn) {
    p.ext_factor = 1.0f;
    const float factor = 1.0f / p.freq_scale;
    p.attn_factor = factor <= 1.0f ? 1.0f : 0.1f * std::log(factor) + 1.0f;
    p.attn_factor *= 1.0f / (1.0f + 0.1f * std::log(factor));
  }
  p.attn_factor *= static_cast<float>(scaling.attn_factor);
  return p;
}

absl::StatusOr<MatmulActivations> ParseMatmulActivations(std::string_view name) {
  if (name == "f32") return MatmulActivations::kF32;
  if (name == "int8") return MatmulActivations::kInt8;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown matmul activations '", util::ToAbsl(name), "' (expected f32 or int8)"));
}

std::string_view MatmulActivationsName(MatmulActivations activations) {
  return activations == MatmulActivations::kInt8 ? "int8" : "f32";
}

absl::StatusOr<cpu::KvDtype> ParseKvDtype(std::string_view name) {
  if (name == "f32") return cpu::KvDtype::kF32;
  if (name == "f16") return cpu::KvDtype::kF16;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown KV cache dtype '", util::ToAbsl(name), "' (expected f32 or f16)"));
}

std::string_view KvDtypeName(cpu::KvDtype dtype) {
  return dtype == cpu::KvDtype::kF16 ? "f16" : "f32";
}

CpuLlamaRunner::CpuLlamaRunner(const model::ModelConfig& config, const LlamaWeights* weights,
                               cpu::ThreadPool* pool, const CpuRunnerOptions& options)
    : config_(config),
      weights_(weights),
      pool_(pool),
      isa_(options.isa),
      int8_(options.activations == MatmulActivations::kInt8
                ? std::make_unique<Int8PackedWeights>(*weights)
                : nullptr),
      kv_shape_{.num_blocks = options.num_kv_blocks,
                .block_size = options.block_size,
                .num_kv_heads = config.num_kv_heads,
                .head_dim = config.head_dim},
      rope_(RopeParamsForModel(config, weights->rope_freqs), config.context_length),
      kv_dtype_(options.kv_dtype) {
  TESSERA_CHECK(cpu::IsaSupported(options.isa), "this CPU cannot run the requested ISA");
  TESSERA_CHECK(options.block_size >= 1, "block_size must be >= 1");
  TESSERA_CHECK(options.num_kv_blocks >= 2, "need the null block and at least one more");
  TESSERA_CHECK(static_cast<int>(weights->layers.size()) == config.num_layers,
                "weights and config disagree on the layer count");
  AllocateKvPools();
}

void CpuLlamaRunner::AllocateKvPools() {
  const int64_t elements = kv_shape_.PoolElements();
  const size_t pool_bytes = static_cast<size_t>(elements * cpu::KvDtypeBytes(kv_dtype_));
  absl::StatusOr<util::HugePageBuffer> memory =
      util::HugePageBuffer::Allocate(2 * config_.num_layers * pool_bytes);
  TESSERA_CHECK(memory.ok(), "CpuLlamaRunner: cannot allocate the KV pools");
  kv_memory_ = *std::move(memory);
  std::memset(kv_memory_.data(), 0, kv_memory_.size());  // commit the memory now, not mid-serving
  for (int p = 0; p < 2 * config_.num_layers; ++p) {
    uint8_t* base = kv_memory_.data() + p * pool_bytes;
    if (kv_dtype_ == cpu::KvDtype::kF16) {
      auto& pools = p % 2 == 0 ? k_half_pools_ : v_half_pools_;
      pools.emplace_back(reinterpret_cast<cpu::Float16*>(base), elements);
    } else {
      auto& pools = p % 2 == 0 ? k_pools_ : v_pools_;
      pools.emplace_back(reinterpret_cast<float*>(base), elements);
    }
  }
}

int64_t CpuLlamaRunner::KvBlockBytes(const model::ModelConfig& config, int block_size,
                                     cpu::KvDtype dtype) {
  return int64_t{2} * config.num_layers * block_size * config.num_kv_heads * config.head_dim *
         cpu::KvDtypeBytes(dtype);
}

KvPoolInfo CpuLlamaRunner::kv_pool() const {
  return {.block_size = kv_shape_.block_size,
          .num_blocks = kv_shape_.num_blocks,
          .bytes = kv_shape_.num_blocks * KvBlockBytes(config_, kv_shape_.block_size, kv_dtype_)};
}

absl::Status CpuLlamaRunner::Validate(std::span<const SequenceWork> batch) const {
  if (batch.empty()) return absl::InvalidArgumentError("batch is empty");
  for (size_t i = 0; i < batch.size(); ++i) {
    const SequenceWork& s = batch[i];
    if (s.tokens.empty()) return SequenceError(i, "has no tokens to process");
    for (int32_t id : s.tokens) {
      if (id < 0 || id >= config_.vocab_size) {
        return SequenceError(i, absl::StrCat("token id ", id, " is outside the vocabulary [0, ",
                                             config_.vocab_size, ")"));
      }
    }
    const int64_t end = int64_t{s.start_pos} + static_cast<int64_t>(s.tokens.size());
    if (s.start_pos < 0 || end > config_.context_length) {
      return SequenceError(i, absl::StrCat("positions [", s.start_pos, ", ", end,
                                           ") exceed the context [0, ", config_.context_length,
                                           ")"));
    }
    const int64_t blocks_needed = (end + kv_shape_.block_size - 1) / kv_shape_.block_size;
    if (static_cast<int64_t>(s.block_table.size()) < blocks_needed) {
      return SequenceError(i, absl::StrCat("block_table has ", s.block_table.size(),
                                           " blocks, positions up to ", end, " need ",
                                           blocks_needed));
    }
    for (int32_t block : s.block_table.first(blocks_needed)) {
      if (block < 1 || block >= kv_shape_.num_blocks) {
        return SequenceError(i, absl::StrCat("block id ", block, " is outside [1, ",
                                             kv_shape_.num_blocks, ") (0 is the null block)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CpuLlamaRunner::Forward(std::span<const SequenceWork> batch, StepLogits* logits) {
  if (absl::Status status = Validate(batch); !status.ok()) return status;
  PrepareInputs(batch);
  cpu::EmbeddingLookup(weights_->token_embd, token_ids_, x_);
  for (int layer = 0; layer < config_.num_layers; ++layer) RunLayer(layer);
  ComputeLogits(batch, logits);
  return absl::OkStatus();
}

void CpuLlamaRunner::PrepareInputs(std::span<const SequenceWork> batch) {
  token_ids_.clear();
  positions_.clear();
  attention_sequences_.clear();
  for (const SequenceWork& s : batch) {
    attention_sequences_.push_back({.query_begin = static_cast<int64_t>(token_ids_.size()),
                                    .num_query_tokens = static_cast<int32_t>(s.tokens.size()),
                                    .start_pos = s.start_pos,
                                    .block_table = s.block_table});
    token_ids_.insert(token_ids_.end(), s.tokens.begin(), s.tokens.end());
    for (size_t t = 0; t < s.tokens.size(); ++t) positions_.push_back(s.start_pos + t);
  }
  num_tokens_ = static_cast<int64_t>(token_ids_.size());
  slots_.resize(num_tokens_);
  for (const cpu::AttentionSequence& s : attention_sequences_) {
    cpu::ComputeSlotMapping(s.block_table, kv_shape_.block_size, s.start_pos,
                            std::span<int64_t>(slots_).subspan(s.query_begin, s.num_query_tokens));
  }
  const int64_t hidden = config_.hidden_size;
  const int64_t q_dim = int64_t{config_.num_heads} * config_.head_dim;
  const int64_t kv_dim = kv_shape_.RowElements();
  Resize(x_, num_tokens_ * hidden);
  Resize(normed_, num_tokens_ * hidden);
  Resize(q_, num_tokens_ * q_dim);
  Resize(k_, num_tokens_ * kv_dim);
  Resize(v_, num_tokens_ * kv_dim);
  Resize(attention_out_, num_tokens_ * q_dim);
  Resize(projected_, num_tokens_ * hidden);
  Resize(gate_, num_tokens_ * config_.ffn_size);
  Resize(up_, num_tokens_ * config_.ffn_size);
}

void CpuLlamaRunner::Project(const Buffer& x, int64_t m,
                             std::initializer_list<Projection> outputs) {
  TESSERA_CHECK(outputs.size() <= cpu::kMaxMatmulOutputs, "Project: too many outputs");
  const size_t count = outputs.size();
  if (int8_ != nullptr) {
    // Int8PackedWeights packed every projection (or aborted); never fall back to f32 silently.
    for (const Projection& p : outputs) {
      TESSERA_CHECK(p.packed.data != nullptr, "Project: int8 activations on an unpacked weight");
    }
    cpu::Int8MatmulOutput packed[cpu::kMaxMatmulOutputs];
    std::transform(outputs.begin(), outputs.end(), packed, [](const Projection& p) {
      return cpu::Int8MatmulOutput{p.packed, p.y};
    });
    cpu::Int8MatmulSameInput(*pool_, x, m, {packed, count}, isa_);
    return;
  }
  cpu::MatmulOutput exact[cpu::kMaxMatmulOutputs];
  std::transform(outputs.begin(), outputs.end(), exact,
                 [](const Projection& p) { return cpu::MatmulOutput{p.w, p.y}; });
  cpu::MatmulSameInput(*pool_, x, m, {exact, count}, isa_);
}

const Int8LayerWeights& CpuLlamaRunner::PackedLayer(int layer) const {
  static const Int8LayerWeights kNone;
  return int8_ ? int8_->layer(layer) : kNone;
}

void CpuLlamaRunner::RunLayer(int layer) {
  Attention(layer);
  FeedForward(layer);
}

void CpuLlamaRunner::Attention(int layer) {
  const LlamaLayerWeights& w = weights_->layers[layer];
  const int64_t n = num_tokens_;
  const int64_t hidden = config_.hidden_size;
  cpu::RmsNorm(x_, w.attn_norm, config_.rms_norm_eps, n, normed_);
  const Int8LayerWeights& p = PackedLayer(layer);
  Project(normed_, n, {{w.wq, p.wq, q_}, {w.wk, p.wk, k_}, {w.wv, p.wv, v_}});
  AddBias(w.bq, n, q_);
  AddBias(w.bk, n, k_);
  AddBias(w.bv, n, v_);
  if (!w.q_norm.empty()) {  // qk-norm: RMSNorm over each head's vector
    cpu::RmsNorm(q_, w.q_norm, config_.rms_norm_eps, n * config_.num_heads, q_);
    cpu::RmsNorm(k_, w.k_norm, config_.rms_norm_eps, n * config_.num_kv_heads, k_);
  }
  cpu::ApplyRope(rope_, positions_, config_.num_heads, config_.head_dim, q_);
  cpu::ApplyRope(rope_, positions_, config_.num_kv_heads, config_.head_dim, k_);
  AttendOverPools(layer);
  Project(attention_out_, n, {{w.wo, p.wo, projected_}});
  AddInPlace(std::span<float>(x_).first(n * hidden),
             std::span<const float>(projected_).first(n * hidden));
}

void CpuLlamaRunner::AttendOverPools(int layer) {
  const int64_t row_elements = num_tokens_ * kv_shape_.RowElements();
  const auto k = std::span<const float>(k_).first(row_elements);
  const auto v = std::span<const float>(v_).first(row_elements);
  const cpu::PagedAttentionParams params{
      .num_heads = config_.num_heads,
      .scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim)),
      .kv = kv_shape_};
  if (kv_dtype_ == cpu::KvDtype::kF16) {
    cpu::WriteKv(kv_shape_, slots_, k, v, k_half_pools_[layer], v_half_pools_[layer]);
    cpu::PagedAttention(*pool_, params, q_, k_half_pools_[layer], v_half_pools_[layer],
                        attention_sequences_, attention_out_, isa_);
  } else {
    cpu::WriteKv(kv_shape_, slots_, k, v, k_pools_[layer], v_pools_[layer]);
    cpu::PagedAttention(*pool_, params, q_, k_pools_[layer], v_pools_[layer],
                        attention_sequences_, attention_out_, isa_);
  }
}

void CpuLlamaRunner::FeedForward(int layer) {
  const LlamaLayerWeights& w = weights_->layers[layer];
  const int64_t n = num_tokens_;
  const int64_t hidden = config_.hidden_size;
  const int64_t ffn_elements = n * config_.ffn_size;
  cpu::RmsNorm(x_, w.ffn_norm, config_.rms_norm_eps, n, normed_);
  const Int8LayerWeights& p = PackedLayer(layer);
  Project(normed_, n, {{w.w_gate, p.w_gate, gate_}, {w.w_up, p.w_up, up_}});
  cpu::SwiGlu(std::span<const float>(gate_).first(ffn_elements),
              std::span<const float>(up_).first(ffn_elements),
              std::span<float>(gate_).first(ffn_elements), isa_);
  Project(gate_, n, {{w.w_down, p.w_down, projected_}});
  AddInPlace(std::span<float>(x_).first(n * hidden),
             std::span<const float>(projected_).first(n * hidden));
}

void CpuLlamaRunner::ComputeLogits(std::span<const SequenceWork> batch, StepLogits* logits) {
  const int64_t hidden = config_.hidden_size;
  logits->vocab_size = config_.vocab_size;
  logits->sequence_index.clear();
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].needs_logits) logits->sequence_index.push_back(static_cast<int32_t>(i));
  }
  const int64_t rows = static_cast<int64_t>(logits->sequence_index.size());
  Resize(final_rows_, rows * hidden);
  for (int64_t r = 0; r < rows; ++r) {
    const cpu::AttentionSequence& s = attention_sequences_[logits->sequence_index[r]];
    const int64_t last_row = s.query_begin + s.num_query_tokens - 1;
    std::copy_n(x_.begin() + last_row * hidden, hidden, final_rows_.begin() + r * hidden);
  }
  cpu::RmsNorm(final_rows_, weights_->output_norm, config_.rms_norm_eps, rows, final_rows_);
  logits->values.resize(rows * config_.vocab_size);
  Project(final_rows_, rows,
          {{weights_->output, int8_ ? int8_->output() : cpu::Int8WeightView{}, logits->values}});
}

}  // namespace tessera::worker
