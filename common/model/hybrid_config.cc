#include "common/model/hybrid_config.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/model/metadata_reader.h"
#include "common/util/check.h"
#include "common/util/status_macros.h"

namespace tessera::model {
namespace {

// llama.cpp's loaders fall back to this interval when the file names none.
constexpr int kDefaultFullAttentionInterval = 4;

absl::Status KeyError(const std::string& key, const std::string& value, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("model metadata '", key, "' = ", value, " ", why));
}

// The ssm.* keys (llama.cpp reads all five as required for the three architectures). The tensor
// shapes use state_size for both head widths while the graph divides inner_size by the value
// heads, so a file is only consistent when the two agree.
absl::StatusOr<GdnDims> ReadGdnDims(const gguf::GgufFile& file, const std::string& p,
                                    std::string_view architecture) {
  GdnDims d;
  TESSERA_ASSIGN_OR_RETURN(d.conv_kernel, ReadPositiveInt(file, p + "ssm.conv_kernel"));
  TESSERA_ASSIGN_OR_RETURN(d.head_k_dim, ReadPositiveInt(file, p + "ssm.state_size"));
  TESSERA_ASSIGN_OR_RETURN(d.num_k_heads, ReadPositiveInt(file, p + "ssm.group_count"));
  TESSERA_ASSIGN_OR_RETURN(d.num_v_heads, ReadPositiveInt(file, p + "ssm.time_step_rank"));
  TESSERA_ASSIGN_OR_RETURN(const int inner_size, ReadPositiveInt(file, p + "ssm.inner_size"));
  if (d.num_v_heads % d.num_k_heads != 0) {
    return KeyError(p + "ssm.time_step_rank", absl::StrCat(d.num_v_heads),
                    absl::StrCat("(value heads) is not a multiple of '", p,
                                 "ssm.group_count' = ", d.num_k_heads, " (key heads)"));
  }
  if (int64_t{d.head_k_dim} * d.num_v_heads != inner_size) {
    return KeyError(p + "ssm.inner_size", absl::StrCat(inner_size),
                    absl::StrCat("must be ssm.state_size x ssm.time_step_rank = ", d.head_k_dim,
                                 " x ", d.num_v_heads, " (llama.cpp's GDN value heads are as "
                                 "wide as its key heads)"));
  }
  d.head_v_dim = inner_size / d.num_v_heads;
  d.head_order = architecture == "qwen3next" ? GdnHeadOrder::kGrouped : GdnHeadOrder::kTiled;
  return d;
}

// llama.cpp: expert_feed_forward_length, else feed_forward_length / expert_used_count; the shared
// expert: expert_shared_feed_forward_length, else feed_forward_length.
absl::StatusOr<MoeDims> ReadMoeDims(const gguf::GgufFile& file, const std::string& p,
                                    int ffn_size) {
  MoeDims m;
  TESSERA_ASSIGN_OR_RETURN(m.num_experts, ReadPositiveInt(file, p + "expert_count"));
  TESSERA_ASSIGN_OR_RETURN(m.num_experts_used, ReadPositiveInt(file, p + "expert_used_count"));
  if (m.num_experts_used > m.num_experts) {
    return KeyError(p + "expert_used_count", absl::StrCat(m.num_experts_used),
                    absl::StrCat("exceeds '", p, "expert_count' = ", m.num_experts));
  }
  TESSERA_ASSIGN_OR_RETURN(m.expert_ffn_size,
                           ReadOptionalPositiveInt(file, p + "expert_feed_forward_length"));
  if (m.expert_ffn_size == 0) m.expert_ffn_size = ffn_size / m.num_experts_used;
  if (m.expert_ffn_size == 0) return MissingKeyError(p + "expert_feed_forward_length");
  TESSERA_ASSIGN_OR_RETURN(m.shared_expert_ffn_size,
                           ReadOptionalPositiveInt(file, p + "expert_shared_feed_forward_length"));
  if (m.shared_expert_ffn_size == 0) m.shared_expert_ffn_size = ffn_size;
  if (m.shared_expert_ffn_size == 0) {
    return MissingKeyError(p + "expert_shared_feed_forward_length");
  }
  return m;
}

// One flag per block (bool or integer, non-zero = recurrent), or one scalar for all blocks:
// llama.cpp's get_key_or_arr over attention.recurrent_layers.
absl::StatusOr<std::vector<bool>> ReadRecurrentFlags(const gguf::GgufValue& value,
                                                     const std::string& key, int num_blocks) {
  auto flag = [](const gguf::GgufValue& v) -> std::optional<bool> {
    if (const bool* b = v.GetIf<bool>()) return *b;
    if (v.IsInteger()) return v.AsDouble() != 0;
    return std::nullopt;
  };
  const gguf::GgufArray* array = value.GetIf<gguf::GgufArray>();
  if (array == nullptr) {
    std::optional<bool> all = flag(value);
    if (!all) return KeyError(key, value.DebugString(), "is not a bool or integer (array)");
    return std::vector<bool>(num_blocks, *all);
  }
  if (array->elements.size() != static_cast<size_t>(num_blocks)) {
    return KeyError(key, value.DebugString(),
                    absl::StrCat("has ", array->elements.size(),
                                 " entries; block_count is ", num_blocks));
  }
  std::vector<bool> flags;
  for (const gguf::GgufValue& e : array->elements) {
    std::optional<bool> f = flag(e);
    if (!f) return KeyError(key, value.DebugString(), "is not an array of bools or integers");
    flags.push_back(*f);
  }
  return flags;
}

// Fills layout->layer_kinds for the trunk's `num_layers` blocks (llama.cpp's is_recr_impl; the
// MTP blocks after the trunk are attention-only and not run).
absl::Status ReadLayerKinds(const gguf::GgufFile& file, const std::string& p, int num_blocks,
                            int num_layers, HybridLayout* layout) {
  const std::string flags_key = p + "attention.recurrent_layers";
  if (const gguf::GgufValue* value = file.FindMetadata(flags_key); value != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<bool> recurrent,
                             ReadRecurrentFlags(*value, flags_key, num_blocks));
    for (int i = 0; i < num_layers; ++i) {
      layout->layer_kinds.push_back(recurrent[i] ? LayerKind::kGatedDeltaNet
                                                 : LayerKind::kAttention);
    }
    return absl::OkStatus();
  }
  TESSERA_ASSIGN_OR_RETURN(layout->full_attention_interval,
                           ReadPositiveInt(file, p + "full_attention_interval",
                                           kDefaultFullAttentionInterval));
  for (int i = 0; i < num_layers; ++i) {
    const bool attention = (i + 1) % layout->full_attention_interval == 0;
    layout->layer_kinds.push_back(attention ? LayerKind::kAttention
                                            : LayerKind::kGatedDeltaNet);
  }
  return absl::OkStatus();
}

// True when ggml's interleaved M-RoPE (GGML_ROPE_TYPE_IMROPE) rotates `pair` by one of the three
// position axes text sets (t, h, w) rather than the fourth: pair -> sector = pair % sum of the
// sections, and sector s is axis s % 3 while s < 3 x that axis's section.
bool ImropeUsesTextAxis(int pair, const std::array<int, 4>& sections, int64_t total) {
  const int64_t s = pair % total;
  return s < 3 * int64_t{sections[s % 3]};
}

// qwen35* rotate with llama.cpp's interleaved M-RoPE. A text token has the same position on the
// t/h/w axes, and every pair's frequency follows its index as in NeoX, so the rotation is NeoX
// RoPE over rope_dim exactly when no rotated pair falls on the fourth axis.
absl::StatusOr<std::array<int, 4>> ReadRopeSections(const gguf::GgufFile& file,
                                                    const std::string& p, int rope_dim) {
  const std::string key = p + "rope.dimension_sections";
  if (!file.HasKey(key)) return MissingKeyError(key);
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> values, file.GetIntArray(key));
  const std::string shown = absl::StrCat("[", absl::StrJoin(values, ", "), "]");
  if (values.empty() || values.size() > 4) {
    return KeyError(key, shown, "must have 1 to 4 entries");
  }
  std::array<int, 4> sections = {};
  int64_t total = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0 || values[i] > rope_dim) return KeyError(key, shown, "is out of range");
    sections[i] = static_cast<int>(values[i]);
    total += values[i];
  }
  if (total == 0) return KeyError(key, shown, "is empty");
  for (int pair = 0; pair < rope_dim / 2; ++pair) {
    if (!ImropeUsesTextAxis(pair, sections, total)) {
      return KeyError(key, shown,
                      absl::StrCat("puts rotated pair ", pair, " of ", rope_dim / 2,
                                   " on the fourth M-RoPE axis, which text never sets"));
    }
  }
  return sections;
}

// The gated attention layers: llama.cpp asserts equal key and value head widths for them.
absl::Status CheckAttentionWidths(const gguf::GgufFile& file, const std::string& p,
                                  const ModelConfig& base) {
  const std::string eps_key = p + "attention.layer_norm_rms_epsilon";
  if (!file.HasKey(eps_key)) return MissingKeyError(eps_key);
  TESSERA_ASSIGN_OR_RETURN(const int value_length,
                           ReadPositiveInt(file, p + "attention.value_length", base.head_dim));
  if (value_length != base.head_dim) {
    return KeyError(p + "attention.value_length", absl::StrCat(value_length),
                    absl::StrCat("must equal the head dim ", base.head_dim,
                                 " (attention.key_length)"));
  }
  return absl::OkStatus();
}

absl::Status CheckStateBytes(const HybridLayout& layout, const std::string& p) {
  const RecurrentStateBytes bytes = PerSequenceStateBytes(layout);
  if (bytes.total > kMaxRecurrentStateBytesPerSequence) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model metadata '", p, "ssm.*' imply ", bytes.total,
        " bytes of recurrent state per sequence (limit ", kMaxRecurrentStateBytesPerSequence,
        ")"));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsHybridArchitecture(std::string_view architecture) {
  return architecture == "qwen3next" || architecture == "qwen35" || architecture == "qwen35moe";
}

bool HybridArchitectureHasExperts(std::string_view architecture) {
  return architecture == "qwen3next" || architecture == "qwen35moe";
}

absl::StatusOr<HybridLayout> ReadHybridLayout(const gguf::GgufFile& file,
                                              const ModelConfig& base) {
  TESSERA_CHECK(IsHybridArchitecture(base.architecture),
                "ReadHybridLayout needs a hybrid architecture");
  const std::string p = base.architecture + ".";
  TESSERA_RETURN_IF_ERROR(CheckAttentionWidths(file, p, base));
  HybridLayout layout;
  TESSERA_ASSIGN_OR_RETURN(layout.gdn, ReadGdnDims(file, p, base.architecture));
  TESSERA_ASSIGN_OR_RETURN(layout.num_nextn_layers,
                           ReadOptionalPositiveInt(file, p + "nextn_predict_layers"));
  if (layout.num_nextn_layers >= base.num_layers) {
    return KeyError(p + "nextn_predict_layers", absl::StrCat(layout.num_nextn_layers),
                    absl::StrCat("leaves no layers of '", p, "block_count' = ", base.num_layers));
  }
  TESSERA_RETURN_IF_ERROR(ReadLayerKinds(file, p, base.num_layers,
                                         base.num_layers - layout.num_nextn_layers, &layout));
  if (HybridArchitectureHasExperts(base.architecture)) {
    TESSERA_ASSIGN_OR_RETURN(layout.moe, ReadMoeDims(file, p, base.ffn_size));
  }
  if (base.architecture != "qwen3next") {
    TESSERA_ASSIGN_OR_RETURN(layout.rope_sections, ReadRopeSections(file, p, base.rope_dim));
  }
  TESSERA_RETURN_IF_ERROR(CheckStateBytes(layout, p));
  return layout;
}

}  // namespace tessera::model
