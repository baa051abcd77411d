#include "tools/convert/tiny_hybrid_model.h"

#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/gguf/ggml_type.h"
#include "common/gguf/gguf_writer.h"
#include "common/tokenizer/bpe_spec.h"
#include "common/util/status_macros.h"
#include "tools/convert/tiny_vocab.h"
#include "tools/convert/tiny_weights.h"

namespace tessera::convert {
namespace {

using gguf::GgmlType;

// Caps that keep a typo from trying to allocate far more than a benchmark model's memory.
constexpr int kMaxLayers = 256;
constexpr int kMaxWidth = 65536;
constexpr int kMaxHeads = 4096;
constexpr int kMaxConvKernel = 64;
constexpr int kMaxContext = 1 << 20;
constexpr int kMaxMerges = 100000;
constexpr uint64_t kMaxTotalValues = uint64_t{1} << 32;
// Tokens the tiny vocabulary can have: 3 specials + 256 bytes + one per merge.
constexpr int kVocabBase = 3 + 256;

constexpr float kMatrixStddev = 0.02f;
constexpr float kNormStddev = 0.02f;
constexpr float kConvStddev = 0.3f;

// ---- Options -----------------------------------------------------------------------------------

// A field of TinyHybridOptions and the make-tiny-model flag that sets it.
struct Field {
  const char* name;
  const char* flag;
};

absl::Status Bad(Field field, int64_t value, std::string_view rule) {
  return absl::InvalidArgumentError(absl::StrCat(
      "tiny hybrid model: ", field.name, " (", field.flag, ") = ", value, " ", std::string(rule)));
}

absl::Status CheckRange(Field field, int value, int low, int high) {
  if (value < low || value > high) {
    return Bad(field, value, absl::StrCat("must be in [", low, ", ", high, "]"));
  }
  return absl::OkStatus();
}

absl::Status CheckMultiple(Field field, int value, int of, std::string_view of_what) {
  if (value % of != 0) {
    return Bad(field, value,
               absl::StrCat("must be a multiple of ", std::string(of_what), " (", of, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckEven(Field field, int value) {
  if (value % 2 != 0) return Bad(field, value, "must be even (RoPE rotates pairs)");
  return absl::OkStatus();
}

absl::Status ValidateTrunk(const TinyHybridOptions& o) {
  TESSERA_RETURN_IF_ERROR(CheckRange({"num_layers", "--layers"}, o.num_layers, 1, kMaxLayers));
  TESSERA_RETURN_IF_ERROR(CheckRange({"full_attention_interval", "--attention-interval"},
                                     o.full_attention_interval, 1, kMaxLayers));
  TESSERA_RETURN_IF_ERROR(CheckRange({"hidden", "--hidden"}, o.hidden, kTinyQuantBlock, kMaxWidth));
  TESSERA_RETURN_IF_ERROR(
      CheckMultiple({"hidden", "--hidden"}, o.hidden, kTinyQuantBlock, "the quantization block"));
  TESSERA_RETURN_IF_ERROR(
      CheckRange({"context_length", "--context"}, o.context_length, 1, kMaxContext));
  TESSERA_RETURN_IF_ERROR(CheckRange({"num_merges", "--merges"}, o.num_merges, 0, kMaxMerges));
  if (!(o.rope_theta > 0.0f) || !(o.rms_eps > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("tiny hybrid model: rope_theta (", o.rope_theta,
                                                   ") and rms_eps (", o.rms_eps, ") must be > 0"));
  }
  return absl::OkStatus();
}

absl::Status ValidateAttention(const TinyHybridOptions& o) {
  TESSERA_RETURN_IF_ERROR(CheckRange({"num_heads", "--heads"}, o.num_heads, 1, kMaxHeads));
  TESSERA_RETURN_IF_ERROR(
      CheckRange({"num_kv_heads", "--kv-heads"}, o.num_kv_heads, 1, o.num_heads));
  TESSERA_RETURN_IF_ERROR(
      CheckMultiple({"num_heads", "--heads"}, o.num_heads, o.num_kv_heads, "num_kv_heads"));
  TESSERA_RETURN_IF_ERROR(CheckRange({"head_dim", "--head-dim"}, o.head_dim, 2, kMaxWidth));
  TESSERA_RETURN_IF_ERROR(CheckEven({"head_dim", "--head-dim"}, o.head_dim));
  TESSERA_RETURN_IF_ERROR(CheckRange({"rope_dim", "--rope-dim"}, o.rope_dim, 2, o.head_dim));
  return CheckEven({"rope_dim", "--rope-dim"}, o.rope_dim);
}

absl::Status ValidateGatedDeltaNet(const TinyHybridOptions& o) {
  TESSERA_RETURN_IF_ERROR(
      CheckRange({"gdn_k_heads", "--gdn-k-heads"}, o.gdn_k_heads, 1, kMaxHeads));
  TESSERA_RETURN_IF_ERROR(
      CheckRange({"gdn_v_heads", "--gdn-v-heads"}, o.gdn_v_heads, 1, kMaxHeads));
  TESSERA_RETURN_IF_ERROR(
      CheckMultiple({"gdn_v_heads", "--gdn-v-heads"}, o.gdn_v_heads, o.gdn_k_heads, "gdn_k_heads"));
  TESSERA_RETURN_IF_ERROR(
      CheckRange({"gdn_head_dim", "--gdn-head-dim"}, o.gdn_head_dim, 1, kMaxWidth));
  return CheckRange({"conv_kernel", "--conv-kernel"}, o.conv_kernel, 1, kMaxConvKernel);
}

absl::Status ValidateFfn(const TinyHybridOptions& o) {
  if (o.arch != TinyHybridArch::kQwen35Moe) {
    TESSERA_RETURN_IF_ERROR(CheckRange({"ffn", "--ffn"}, o.ffn, 1, kMaxWidth));
  }
  if (!TinyHybridArchHasExperts(o.arch)) return absl::OkStatus();
  TESSERA_RETURN_IF_ERROR(CheckRange({"num_experts", "--experts"}, o.num_experts, 1, kMaxHeads));
  TESSERA_RETURN_IF_ERROR(
      CheckRange({"num_experts_used", "--experts-used"}, o.num_experts_used, 1, o.num_experts));
  TESSERA_RETURN_IF_ERROR(CheckRange({"expert_ffn", "--expert-ffn"}, o.expert_ffn, 1, kMaxWidth));
  return CheckRange({"shared_expert_ffn", "--shared-ffn"}, o.shared_expert_ffn, 1, kMaxWidth);
}

// ---- Tensors -----------------------------------------------------------------------------------

// Which group a matrix belongs to, for TinyWeightType::kMixed.
enum class MatrixRole { kEmbedding, kOutput, kMixer, kFfn };

GgmlType MixedType(MatrixRole role, int layer) {
  switch (role) {
    case MatrixRole::kEmbedding:
      return GgmlType::kQ8_0;
    case MatrixRole::kOutput:
      return GgmlType::kF16;
    case MatrixRole::kMixer:
      return layer % 2 == 0 ? GgmlType::kQ4_1 : GgmlType::kQ8_0;
    case MatrixRole::kFfn:
      return layer % 2 == 0 ? GgmlType::kF16 : GgmlType::kQ4_1;
  }
  return GgmlType::kF32;
}

GgmlType MatrixType(TinyWeightType weight_type, MatrixRole role, int layer, uint64_t row) {
  GgmlType type = GgmlType::kF32;
  switch (weight_type) {
    case TinyWeightType::kF32:
      return GgmlType::kF32;
    case TinyWeightType::kF16:
      return GgmlType::kF16;
    case TinyWeightType::kQ8_0:
      type = GgmlType::kQ8_0;
      break;
    case TinyWeightType::kQ4_1:
      type = GgmlType::kQ4_1;
      break;
    case TinyWeightType::kMixed:
      type = MixedType(role, layer);
      break;
  }
  const bool block_type = type == GgmlType::kQ8_0 || type == GgmlType::kQ4_1;
  return block_type && row % kTinyQuantBlock != 0 ? GgmlType::kF32 : type;
}

// Appends the plans of one layer; a small helper so each tensor is one readable line.
class LayerPlanner {
 public:
  LayerPlanner(const TinyHybridOptions& o, int layer, std::vector<TinyTensorPlan>* plan)
      : o_(o), layer_(layer), plan_(plan) {}

  void Matrix(const char* what, std::vector<uint64_t> dims, MatrixRole role) {
    const GgmlType type = MatrixType(o_.weight_type, role, layer_, dims[0]);
    Add(what, ".weight", std::move(dims), type, TinyInit::Normal(0.0f, kMatrixStddev));
  }
  void Norm(const char* what, uint64_t width) {
    Add(what, ".weight", {width}, GgmlType::kF32, TinyInit::Normal(1.0f, kNormStddev));
  }
  void F32(const char* what, const char* suffix, std::vector<uint64_t> dims, TinyInit init) {
    Add(what, suffix, std::move(dims), GgmlType::kF32, init);
  }

 private:
  void Add(const char* what, const char* suffix, std::vector<uint64_t> dims, GgmlType type,
           TinyInit init) {
    plan_->push_back(
        {absl::StrCat("blk.", layer_, ".", what, suffix), std::move(dims), type, init});
  }

  const TinyHybridOptions& o_;
  int layer_;
  std::vector<TinyTensorPlan>* plan_;
};

bool IsAttentionLayer(const TinyHybridOptions& o, int layer) {
  return (layer + 1) % o.full_attention_interval == 0;
}

void PlanAttention(const TinyHybridOptions& o, LayerPlanner* p) {
  const uint64_t hidden = o.hidden;
  const uint64_t q_width = static_cast<uint64_t>(o.num_heads) * o.head_dim;
  const uint64_t kv_width = static_cast<uint64_t>(o.num_kv_heads) * o.head_dim;
  p->Matrix("attn_q", {hidden, 2 * q_width}, MatrixRole::kMixer);  // per head [query | gate]
  p->Matrix("attn_k", {hidden, kv_width}, MatrixRole::kMixer);
  p->Matrix("attn_v", {hidden, kv_width}, MatrixRole::kMixer);
  p->Matrix("attn_output", {q_width, hidden}, MatrixRole::kMixer);
  p->Norm("attn_q_norm", o.head_dim);
  p->Norm("attn_k_norm", o.head_dim);
}

void PlanGatedDeltaNet(const TinyHybridOptions& o, LayerPlanner* p) {
  const uint64_t hidden = o.hidden;
  const uint64_t v_heads = o.gdn_v_heads;
  const uint64_t key_dim = static_cast<uint64_t>(o.gdn_k_heads) * o.gdn_head_dim;
  const uint64_t value_dim = v_heads * o.gdn_head_dim;
  const uint64_t conv_channels = 2 * key_dim + value_dim;  // [q | k | v]
  p->Matrix("attn_qkv", {hidden, conv_channels}, MatrixRole::kMixer);
  p->Matrix("attn_gate", {hidden, value_dim}, MatrixRole::kMixer);
  p->F32("ssm_conv1d", ".weight", {static_cast<uint64_t>(o.conv_kernel), conv_channels},
         TinyInit::Normal(0.0f, kConvStddev));
  p->F32("ssm_dt", ".bias", {v_heads}, TinyInit::Uniform(-4.0f, 0.0f));
  p->F32("ssm_a", "", {v_heads}, TinyInit::NegExpOfUniform(0.0f, 2.0f));
  if (o.arch == TinyHybridArch::kQwen3Next) {  // per key head [beta (r) | alpha (r)]
    p->Matrix("ssm_ba", {hidden, 2 * v_heads}, MatrixRole::kMixer);
  } else {
    p->Matrix("ssm_beta", {hidden, v_heads}, MatrixRole::kMixer);
    p->Matrix("ssm_alpha", {hidden, v_heads}, MatrixRole::kMixer);
  }
  p->Norm("ssm_norm", o.gdn_head_dim);  // stored as is (no +1 convention), still ~1
  p->Matrix("ssm_out", {value_dim, hidden}, MatrixRole::kMixer);
}

void PlanFfn(const TinyHybridOptions& o, LayerPlanner* p) {
  const uint64_t hidden = o.hidden;
  if (!TinyHybridArchHasExperts(o.arch)) {
    const uint64_t ffn = o.ffn;
    p->Matrix("ffn_gate", {hidden, ffn}, MatrixRole::kFfn);
    p->Matrix("ffn_up", {hidden, ffn}, MatrixRole::kFfn);
    p->Matrix("ffn_down", {ffn, hidden}, MatrixRole::kFfn);
    return;
  }
  const uint64_t experts = o.num_experts;
  const uint64_t ffn = o.expert_ffn;
  const uint64_t shared = o.shared_expert_ffn;
  p->Matrix("ffn_gate_inp", {hidden, experts}, MatrixRole::kFfn);
  p->Matrix("ffn_gate_exps", {hidden, ffn, experts}, MatrixRole::kFfn);
  p->Matrix("ffn_up_exps", {hidden, ffn, experts}, MatrixRole::kFfn);
  p->Matrix("ffn_down_exps", {ffn, hidden, experts}, MatrixRole::kFfn);
  p->F32("ffn_gate_inp_shexp", ".weight", {hidden}, TinyInit::Normal(0.0f, kMatrixStddev));
  p->Matrix("ffn_gate_shexp", {hidden, shared}, MatrixRole::kFfn);
  p->Matrix("ffn_up_shexp", {hidden, shared}, MatrixRole::kFfn);
  p->Matrix("ffn_down_shexp", {shared, hidden}, MatrixRole::kFfn);
}

std::vector<TinyTensorPlan> PlanTensors(const TinyHybridOptions& o, uint64_t vocab) {
  const uint64_t hidden = o.hidden;
  const TinyInit matrix = TinyInit::Normal(0.0f, kMatrixStddev);
  std::vector<TinyTensorPlan> plan;
  plan.push_back({"token_embd.weight",
                  {hidden, vocab},
                  MatrixType(o.weight_type, MatrixRole::kEmbedding, 0, hidden),
                  matrix});
  for (int layer = 0; layer < o.num_layers; ++layer) {
    LayerPlanner p(o, layer, &plan);
    p.Norm("attn_norm", hidden);
    if (IsAttentionLayer(o, layer)) {
      PlanAttention(o, &p);
    } else {
      PlanGatedDeltaNet(o, &p);
    }
    p.Norm("post_attention_norm", hidden);
    PlanFfn(o, &p);
  }
  plan.push_back(
      {"output_norm.weight", {hidden}, GgmlType::kF32, TinyInit::Normal(1.0f, kNormStddev)});
  if (!o.tied_embeddings) {
    plan.push_back({"output.weight",
                    {hidden, vocab},
                    MatrixType(o.weight_type, MatrixRole::kOutput, 0, hidden),
                    matrix});
  }
  return plan;
}

// Multiplications saturate so absurd options are caught by the cap rather than wrapping.
uint64_t TotalValues(const std::vector<TinyTensorPlan>& plan) {
  uint64_t total = 0;
  for (const TinyTensorPlan& t : plan) {
    uint64_t n = 1;
    for (uint64_t d : t.dims) {
      if (__builtin_mul_overflow(n, d, &n)) return UINT64_MAX;
    }
    if (__builtin_add_overflow(total, n, &total)) return UINT64_MAX;
  }
  return total;
}

// ---- Metadata ----------------------------------------------------------------------------------

void AddAttentionKeys(const TinyHybridOptions& o, const std::string& p, gguf::GgufWriter* w) {
  w->AddUint32(p + "attention.head_count", static_cast<uint32_t>(o.num_heads));
  w->AddUint32(p + "attention.head_count_kv", static_cast<uint32_t>(o.num_kv_heads));
  w->AddUint32(p + "attention.key_length", static_cast<uint32_t>(o.head_dim));
  w->AddUint32(p + "attention.value_length", static_cast<uint32_t>(o.head_dim));
  w->AddFloat32(p + "rope.freq_base", o.rope_theta);
  w->AddUint32(p + "rope.dimension_count", static_cast<uint32_t>(o.rope_dim));
  if (o.arch != TinyHybridArch::kQwen3Next) {
    w->AddInt32Array(p + "rope.dimension_sections", TinyRopeSections(o.rope_dim));
  }
  w->AddFloat32(p + "attention.layer_norm_rms_epsilon", o.rms_eps);
}

void AddGdnAndExpertKeys(const TinyHybridOptions& o, const std::string& p, gguf::GgufWriter* w) {
  if (TinyHybridArchHasExperts(o.arch)) {
    w->AddUint32(p + "expert_count", static_cast<uint32_t>(o.num_experts));
    w->AddUint32(p + "expert_used_count", static_cast<uint32_t>(o.num_experts_used));
    w->AddUint32(p + "expert_feed_forward_length", static_cast<uint32_t>(o.expert_ffn));
    w->AddUint32(p + "expert_shared_feed_forward_length",
                 static_cast<uint32_t>(o.shared_expert_ffn));
  }
  w->AddUint32(p + "ssm.conv_kernel", static_cast<uint32_t>(o.conv_kernel));
  w->AddUint32(p + "ssm.state_size", static_cast<uint32_t>(o.gdn_head_dim));
  w->AddUint32(p + "ssm.group_count", static_cast<uint32_t>(o.gdn_k_heads));
  w->AddUint32(p + "ssm.time_step_rank", static_cast<uint32_t>(o.gdn_v_heads));
  w->AddUint32(p + "ssm.inner_size", static_cast<uint32_t>(o.gdn_v_heads * o.gdn_head_dim));
  w->AddUint32(p + "full_attention_interval", static_cast<uint32_t>(o.full_attention_interval));
}

void AddHyperParameters(const TinyHybridOptions& o, uint32_t vocab, gguf::GgufWriter* w) {
  const std::string arch(TinyHybridArchName(o.arch));
  const std::string p = arch + ".";
  w->AddString("general.architecture", arch);
  w->AddString("general.name", absl::StrCat("tessera-tiny-", arch));
  w->AddUint32("general.quantization_version", 2);
  w->AddUint32(p + "block_count", static_cast<uint32_t>(o.num_layers));
  w->AddUint32(p + "context_length", static_cast<uint32_t>(o.context_length));
  w->AddUint32(p + "embedding_length", static_cast<uint32_t>(o.hidden));
  if (o.arch != TinyHybridArch::kQwen35Moe) {  // its converter leaves it out
    w->AddUint32(p + "feed_forward_length", static_cast<uint32_t>(o.ffn));
  }
  AddAttentionKeys(o, p, w);
  w->AddUint32(p + "vocab_size", vocab);
  AddGdnAndExpertKeys(o, p, w);
}

absl::StatusOr<gguf::GgufWriter> BuildWriter(const TinyHybridOptions& options) {
  TESSERA_RETURN_IF_ERROR(ValidateTinyHybridOptions(options));
  absl::StatusOr<tokenizer::BpeSpec> vocab = TrainTinyVocab(options.num_merges);
  if (!vocab.ok()) return vocab.status();
  const uint32_t vocab_size = static_cast<uint32_t>(vocab->tokens.size());

  gguf::GgufWriter writer;
  AddHyperParameters(options, vocab_size, &writer);
  AddTinyTokenizer(*vocab, &writer);
  for (const TinyTensorPlan& plan : PlanTensors(options, vocab_size)) {
    TESSERA_RETURN_IF_ERROR(AddTinyTensor(plan, options.seed, &writer));
  }
  return writer;
}

constexpr std::array<std::pair<TinyHybridArch, std::string_view>, 3> kArchNames = {{
    {TinyHybridArch::kQwen35, "qwen35"},
    {TinyHybridArch::kQwen35Moe, "qwen35moe"},
    {TinyHybridArch::kQwen3Next, "qwen3next"},
}};

constexpr std::array<std::pair<TinyWeightType, std::string_view>, 5> kWeightTypeNames = {{
    {TinyWeightType::kF32, "f32"},
    {TinyWeightType::kF16, "f16"},
    {TinyWeightType::kQ8_0, "q8_0"},
    {TinyWeightType::kQ4_1, "q4_1"},
    {TinyWeightType::kMixed, "mixed"},
}};

}  // namespace

std::string_view TinyHybridArchName(TinyHybridArch arch) {
  for (const auto& [value, name] : kArchNames) {
    if (value == arch) return name;
  }
  return "unknown";
}

std::optional<TinyHybridArch> ParseTinyHybridArch(std::string_view name) {
  for (const auto& [value, known] : kArchNames) {
    if (known == name) return value;
  }
  return std::nullopt;
}

bool TinyHybridArchHasExperts(TinyHybridArch arch) { return arch != TinyHybridArch::kQwen35; }

std::string_view TinyWeightTypeName(TinyWeightType type) {
  for (const auto& [value, name] : kWeightTypeNames) {
    if (value == type) return name;
  }
  return "unknown";
}

std::optional<TinyWeightType> ParseTinyWeightType(std::string_view name) {
  for (const auto& [value, known] : kWeightTypeNames) {
    if (known == name) return value;
  }
  return std::nullopt;
}

std::vector<int32_t> TinyRopeSections(int rope_dim) {
  std::vector<int32_t> sections(4, 0);
  for (int pair = 0; pair < rope_dim / 2; ++pair) ++sections[pair % 3];
  return sections;
}

absl::Status ValidateTinyHybridOptions(const TinyHybridOptions& o) {
  TESSERA_RETURN_IF_ERROR(ValidateTrunk(o));
  TESSERA_RETURN_IF_ERROR(ValidateAttention(o));
  TESSERA_RETURN_IF_ERROR(ValidateGatedDeltaNet(o));
  TESSERA_RETURN_IF_ERROR(ValidateFfn(o));
  const uint64_t total = TotalValues(PlanTensors(o, kVocabBase + o.num_merges));
  if (total > kMaxTotalValues) {
    return absl::InvalidArgumentError(absl::StrCat("tiny hybrid model: the options ask for ", total,
                                                   " weights in all, more than the cap of ",
                                                   kMaxTotalValues));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint8_t>> BuildTinyHybridGguf(const TinyHybridOptions& options) {
  absl::StatusOr<gguf::GgufWriter> writer = BuildWriter(options);
  if (!writer.ok()) return writer.status();
  return writer->Serialize();
}

absl::Status WriteTinyHybridGguf(const TinyHybridOptions& options, const std::string& path) {
  absl::StatusOr<gguf::GgufWriter> writer = BuildWriter(options);
  if (!writer.ok()) return writer.status();
  return writer->WriteToFile(path);
}

}  // namespace tessera::convert
