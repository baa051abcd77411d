#include "tools/convert/tiny_model.h"

#include <iterator>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/gguf/ggml_type.h"
#include "common/gguf/gguf_writer.h"
#include "common/tokenizer/bpe_spec.h"
#include "tools/convert/tiny_vocab.h"
#include "tools/convert/tiny_weights.h"

namespace tessera::convert {
namespace {

using gguf::GgmlType;

// Caps that keep a typo from trying to allocate a real model's worth of memory.
constexpr int kMaxLayers = 256;
constexpr int kMaxWidth = 65536;
constexpr int kMaxContext = 1 << 20;
constexpr int kMaxMerges = 100000;
constexpr float kWeightStddev = 0.02f;
constexpr float kNormStddev = 0.02f;
constexpr float kBiasStddev = 0.1f;

constexpr std::string_view kArchNames[] = {"llama", "qwen2", "qwen3"};

absl::Status Bad(std::string_view field, int value, std::string_view rule) {
  return absl::InvalidArgumentError(
      absl::StrCat("tiny model: ", std::string(field), " = ", value, " ", std::string(rule)));
}

// Matrices ~N(0, 0.02), norm weights ~1.
TinyTensorPlan Matrix(std::string name, std::vector<uint64_t> dims, GgmlType type) {
  return {std::move(name), std::move(dims), type, TinyInit::Normal(0.0f, kWeightStddev)};
}
TinyTensorPlan Norm(std::string name, uint64_t width) {
  return {std::move(name), {width}, GgmlType::kF32, TinyInit::Normal(1.0f, kNormStddev)};
}

void PlanLayer(const TinyModelOptions& o, int layer, std::vector<TinyTensorPlan>* plan) {
  const uint64_t hidden = o.hidden;
  const uint64_t kv_dim = static_cast<uint64_t>(o.hidden / o.num_heads) * o.num_kv_heads;
  const uint64_t ffn = o.ffn;
  // Alternate encodings by layer so multi-layer models exercise more dequantization paths.
  const GgmlType attn = layer % 2 == 0 ? GgmlType::kQ4_1 : GgmlType::kQ8_0;
  const GgmlType mlp = layer % 2 == 0 ? GgmlType::kF16 : GgmlType::kQ4_1;
  const std::string prefix = absl::StrCat("blk.", layer, ".");
  plan->push_back(Norm(prefix + "attn_norm.weight", hidden));
  plan->push_back(Matrix(prefix + "attn_q.weight", {hidden, hidden}, attn));
  plan->push_back(Matrix(prefix + "attn_k.weight", {hidden, kv_dim}, attn));
  plan->push_back(Matrix(prefix + "attn_v.weight", {hidden, kv_dim}, attn));
  plan->push_back(Matrix(prefix + "attn_output.weight", {hidden, hidden}, attn));
  if (o.arch == TinyDenseArch::kQwen2) {
    for (auto [name, width] : {std::pair{"attn_q.bias", hidden}, std::pair{"attn_k.bias", kv_dim},
                               std::pair{"attn_v.bias", kv_dim}}) {
      plan->push_back(
          {prefix + name, {width}, GgmlType::kF32, TinyInit::Normal(0.0f, kBiasStddev)});
    }
  }
  if (o.arch == TinyDenseArch::kQwen3) {
    const uint64_t head_dim = static_cast<uint64_t>(o.hidden / o.num_heads);
    plan->push_back(Norm(prefix + "attn_q_norm.weight", head_dim));
    plan->push_back(Norm(prefix + "attn_k_norm.weight", head_dim));
  }
  plan->push_back(Norm(prefix + "ffn_norm.weight", hidden));
  plan->push_back(Matrix(prefix + "ffn_gate.weight", {hidden, ffn}, mlp));
  plan->push_back(Matrix(prefix + "ffn_up.weight", {hidden, ffn}, mlp));
  plan->push_back(Matrix(prefix + "ffn_down.weight", {ffn, hidden}, mlp));
}

std::vector<TinyTensorPlan> PlanTensors(const TinyModelOptions& o, uint64_t vocab) {
  const uint64_t hidden = o.hidden;
  std::vector<TinyTensorPlan> plan;
  plan.push_back(Matrix("token_embd.weight", {hidden, vocab}, GgmlType::kQ8_0));
  for (int layer = 0; layer < o.num_layers; ++layer) PlanLayer(o, layer, &plan);
  plan.push_back(Norm("output_norm.weight", hidden));
  if (!o.tied_embeddings) plan.push_back(Matrix("output.weight", {hidden, vocab}, GgmlType::kF16));
  return plan;
}

void AddHyperParameters(const TinyModelOptions& o, uint32_t vocab, gguf::GgufWriter* writer) {
  const std::string arch(TinyDenseArchName(o.arch));
  const std::string p = arch + ".";
  writer->AddString("general.architecture", arch);
  writer->AddString("general.name", "tessera-tiny-" + arch);
  writer->AddUint32("general.quantization_version", 2);
  writer->AddUint32(p + "block_count", static_cast<uint32_t>(o.num_layers));
  writer->AddUint32(p + "context_length", static_cast<uint32_t>(o.context_length));
  writer->AddUint32(p + "embedding_length", static_cast<uint32_t>(o.hidden));
  writer->AddUint32(p + "feed_forward_length", static_cast<uint32_t>(o.ffn));
  writer->AddUint32(p + "attention.head_count", static_cast<uint32_t>(o.num_heads));
  writer->AddUint32(p + "attention.head_count_kv", static_cast<uint32_t>(o.num_kv_heads));
  writer->AddFloat32(p + "rope.freq_base", o.rope_theta);
  writer->AddFloat32(p + "attention.layer_norm_rms_epsilon", o.rms_eps);
  writer->AddUint32(p + "vocab_size", vocab);
  writer->AddUint32(p + "rope.dimension_count", static_cast<uint32_t>(o.hidden / o.num_heads));
}

}  // namespace

std::string_view TinyDenseArchName(TinyDenseArch arch) {
  return kArchNames[static_cast<int>(arch)];
}

std::optional<TinyDenseArch> ParseTinyDenseArch(std::string_view name) {
  for (int i = 0; i < static_cast<int>(std::size(kArchNames)); ++i) {
    if (kArchNames[i] == name) return static_cast<TinyDenseArch>(i);
  }
  return std::nullopt;
}

absl::Status ValidateTinyModelOptions(const TinyModelOptions& o) {
  if (o.num_layers < 1 || o.num_layers > kMaxLayers) {
    return Bad("num_layers", o.num_layers, absl::StrCat("must be in [1, ", kMaxLayers, "]"));
  }
  if (o.hidden < kTinyQuantBlock || o.hidden > kMaxWidth || o.hidden % kTinyQuantBlock != 0) {
    return Bad("hidden", o.hidden,
               absl::StrCat("must be a positive multiple of 32, at most ", kMaxWidth));
  }
  if (o.ffn < kTinyQuantBlock || o.ffn > kMaxWidth || o.ffn % kTinyQuantBlock != 0) {
    return Bad("ffn", o.ffn,
               absl::StrCat("must be a positive multiple of 32, at most ", kMaxWidth));
  }
  if (o.num_heads < 1 || o.hidden % o.num_heads != 0) {
    return Bad("num_heads", o.num_heads,
               absl::StrCat("must be >= 1 and divide hidden (", o.hidden, ")"));
  }
  if ((o.hidden / o.num_heads) % 2 != 0) {
    return Bad("num_heads", o.num_heads, "must leave an even head_dim (RoPE rotates pairs)");
  }
  if (o.num_kv_heads < 1 || o.num_heads % o.num_kv_heads != 0) {
    return Bad("num_kv_heads", o.num_kv_heads,
               absl::StrCat("must be >= 1 and divide num_heads (", o.num_heads, ")"));
  }
  if (o.context_length < 1 || o.context_length > kMaxContext) {
    return Bad("context_length", o.context_length,
               absl::StrCat("must be in [1, ", kMaxContext, "]"));
  }
  if (o.num_merges < 0 || o.num_merges > kMaxMerges) {
    return Bad("num_merges", o.num_merges, absl::StrCat("must be in [0, ", kMaxMerges, "]"));
  }
  if (!(o.rope_theta > 0.0f) || !(o.rms_eps > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("tiny model: rope_theta (", o.rope_theta,
                                                   ") and rms_eps (", o.rms_eps, ") must be > 0"));
  }
  return absl::OkStatus();
}

namespace {

absl::StatusOr<gguf::GgufWriter> BuildWriter(const TinyModelOptions& options) {
  if (absl::Status s = ValidateTinyModelOptions(options); !s.ok()) return s;
  absl::StatusOr<tokenizer::BpeSpec> vocab =
      TrainTinyVocab(options.num_merges, options.chat_style);
  if (!vocab.ok()) return vocab.status();
  const uint32_t vocab_size = static_cast<uint32_t>(vocab->tokens.size());

  gguf::GgufWriter writer;
  AddHyperParameters(options, vocab_size, &writer);
  AddTinyTokenizer(*vocab, &writer, options.chat_style);
  for (const TinyTensorPlan& plan : PlanTensors(options, vocab_size)) {
    if (absl::Status s = AddTinyTensor(plan, options.seed, &writer); !s.ok()) return s;
  }
  return writer;
}

}  // namespace

absl::StatusOr<std::vector<uint8_t>> BuildTinyLlamaGguf(const TinyModelOptions& options) {
  absl::StatusOr<gguf::GgufWriter> writer = BuildWriter(options);
  if (!writer.ok()) return writer.status();
  return writer->Serialize();
}

absl::Status WriteTinyLlamaGguf(const TinyModelOptions& options, const std::string& path) {
  absl::StatusOr<gguf::GgufWriter> writer = BuildWriter(options);
  if (!writer.ok()) return writer.status();
  return writer->WriteToFile(path);
}

}  // namespace tessera::convert
