#include "common/model/hybrid_tensors.h"

#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/util/check.h"
#include "common/util/status_macros.h"

namespace tessera::model {
namespace {

using Dims = std::vector<uint64_t>;

// Widths are products of untrusted metadata; saturating keeps an absurd product from wrapping
// into a shape some tensor happens to have.
uint64_t Mul(uint64_t a, uint64_t b) {
  uint64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::numeric_limits<uint64_t>::max();
  return product;
}

// The names llama.cpp's tensor table gives these architectures ("blk.%d.<what>" + suffix).
std::string LayerTensor(int layer, const char* what, const char* suffix = ".weight") {
  return absl::StrCat("blk.", layer, ".", what, suffix);
}

// Gated attention: attn_q holds each head's query and its output gate ([q | gate] per head), so
// it is twice as wide as the attention output; q/k get a per-head RMSNorm.
void AddAttention(const ModelConfig& c, int layer, std::vector<ExpectedTensor>* out) {
  const uint64_t hidden = c.hidden_size;
  const uint64_t q_width = Mul(c.head_dim, c.num_heads);
  const uint64_t kv_width = Mul(c.head_dim, c.num_kv_heads);
  out->push_back({LayerTensor(layer, "attn_q"), {hidden, Mul(2, q_width)}});
  out->push_back({LayerTensor(layer, "attn_k"), {hidden, kv_width}});
  out->push_back({LayerTensor(layer, "attn_v"), {hidden, kv_width}});
  out->push_back({LayerTensor(layer, "attn_output"), {q_width, hidden}});
  out->push_back({LayerTensor(layer, "attn_q_norm"), {static_cast<uint64_t>(c.head_dim)}});
  out->push_back({LayerTensor(layer, "attn_k_norm"), {static_cast<uint64_t>(c.head_dim)}});
}

// Gated DeltaNet: input projections to the conv channels [q | k | v] and to the output gate z,
// the per-value-head decay and beta inputs, the conv kernel, and the gated output norm.
void AddGatedDeltaNet(const ModelConfig& c, int layer, const HybridTensorForms& forms,
                      std::vector<ExpectedTensor>* out) {
  const GdnDims& d = c.hybrid->gdn;
  const uint64_t hidden = c.hidden_size;
  const uint64_t key_dim = GdnKeyDim(d);
  const uint64_t value_dim = GdnValueDim(d);
  const uint64_t v_heads = d.num_v_heads;
  if (forms.gdn_fused_qkvz) {
    out->push_back({LayerTensor(layer, "ssm_in"), {hidden, 2 * key_dim + 2 * value_dim}});
  } else {
    out->push_back({LayerTensor(layer, "attn_qkv"), {hidden, 2 * key_dim + value_dim}});
    out->push_back({LayerTensor(layer, "attn_gate"), {hidden, value_dim}});
  }
  out->push_back({LayerTensor(layer, "ssm_conv1d"),
                  {static_cast<uint64_t>(d.conv_kernel), 2 * key_dim + value_dim}});
  out->push_back({LayerTensor(layer, "ssm_dt", ".bias"), {v_heads}});
  out->push_back({LayerTensor(layer, "ssm_a", ""), {v_heads}});
  if (d.head_order == GdnHeadOrder::kGrouped) {  // qwen3next: one [beta | alpha] projection
    out->push_back({LayerTensor(layer, "ssm_ba"), {hidden, 2 * v_heads}});
  } else {
    out->push_back({LayerTensor(layer, "ssm_beta"), {hidden, v_heads}});
    out->push_back({LayerTensor(layer, "ssm_alpha"), {hidden, v_heads}});
  }
  out->push_back({LayerTensor(layer, "ssm_norm"), {static_cast<uint64_t>(d.head_v_dim)}});
  out->push_back({LayerTensor(layer, "ssm_out"), {value_dim, hidden}});
}

void AddFfn(const ModelConfig& c, int layer, const HybridTensorForms& forms,
            std::vector<ExpectedTensor>* out) {
  const uint64_t hidden = c.hidden_size;
  if (!c.hybrid->moe) {
    const uint64_t ffn = c.ffn_size;
    out->push_back({LayerTensor(layer, "ffn_gate"), {hidden, ffn}});
    out->push_back({LayerTensor(layer, "ffn_up"), {hidden, ffn}});
    out->push_back({LayerTensor(layer, "ffn_down"), {ffn, hidden}});
    return;
  }
  const MoeDims& m = *c.hybrid->moe;
  const uint64_t experts = m.num_experts;
  const uint64_t ffn = m.expert_ffn_size;
  const uint64_t shared = m.shared_expert_ffn_size;
  out->push_back({LayerTensor(layer, "ffn_gate_inp"), {hidden, experts}});
  if (forms.moe_fused_gate_up) {
    out->push_back({LayerTensor(layer, "ffn_gate_up_exps"), {hidden, 2 * ffn, experts}});
  } else {
    out->push_back({LayerTensor(layer, "ffn_gate_exps"), {hidden, ffn, experts}});
    out->push_back({LayerTensor(layer, "ffn_up_exps"), {hidden, ffn, experts}});
  }
  out->push_back({LayerTensor(layer, "ffn_down_exps"), {ffn, hidden, experts}});
  out->push_back({LayerTensor(layer, "ffn_gate_inp_shexp"), {hidden}});
  out->push_back({LayerTensor(layer, "ffn_gate_shexp"), {hidden, shared}});
  out->push_back({LayerTensor(layer, "ffn_up_shexp"), {hidden, shared}});
  out->push_back({LayerTensor(layer, "ffn_down_shexp"), {shared, hidden}});
}

// ggml compares all four dims, absent ones counting as 1.
bool SameShape(const Dims& actual, const Dims& expected) {
  for (size_t i = 0; i < static_cast<size_t>(gguf::kGgufMaxDims); ++i) {
    const uint64_t a = i < actual.size() ? actual[i] : 1;
    const uint64_t e = i < expected.size() ? expected[i] : 1;
    if (a != e) return false;
  }
  return true;
}

absl::Status CheckTensor(const gguf::GgufFile& file, const ExpectedTensor& expected) {
  const gguf::GgufTensorInfo* info = file.FindTensor(expected.name);
  if (info == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(expected.name, ": missing"));
  }
  if (!SameShape(info->dims, expected.dims)) {
    return absl::InvalidArgumentError(
        absl::StrCat(expected.name, ": shape [", absl::StrJoin(info->dims, ", "),
                     "], expected [", absl::StrJoin(expected.dims, ", "), "]"));
  }
  return absl::OkStatus();
}

// Which storage the file uses, read off the first layer that has the choice; later layers are
// then held to it (a mix would be missing tensors there).
HybridTensorForms DetectForms(const gguf::GgufFile& file, const ModelConfig& c) {
  HybridTensorForms forms;
  const std::vector<LayerKind>& kinds = c.hybrid->layer_kinds;
  for (int layer = 0; layer < static_cast<int>(kinds.size()); ++layer) {
    if (kinds[layer] != LayerKind::kGatedDeltaNet) continue;
    forms.gdn_fused_qkvz = c.hybrid->gdn.head_order == GdnHeadOrder::kGrouped &&
                           file.FindTensor(LayerTensor(layer, "ssm_in")) != nullptr;
    break;
  }
  forms.moe_fused_gate_up =
      c.hybrid->moe && file.FindTensor(LayerTensor(0, "ffn_gate_up_exps")) != nullptr;
  return forms;
}

absl::Status CheckGlobalTensors(const gguf::GgufFile& file, const ModelConfig& c) {
  const uint64_t hidden = c.hidden_size;
  const uint64_t vocab = c.vocab_size;
  TESSERA_RETURN_IF_ERROR(CheckTensor(file, {"token_embd.weight", {hidden, vocab}}));
  TESSERA_RETURN_IF_ERROR(CheckTensor(file, {"output_norm.weight", {hidden}}));
  if (!c.tied_embeddings) {
    TESSERA_RETURN_IF_ERROR(CheckTensor(file, {"output.weight", {hidden, vocab}}));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<ExpectedTensor> ExpectedLayerTensors(const ModelConfig& config, int layer,
                                                 const HybridTensorForms& forms) {
  TESSERA_CHECK(config.hybrid.has_value(), "ExpectedLayerTensors needs a hybrid config");
  TESSERA_CHECK(layer >= 0 && layer < static_cast<int>(config.hybrid->layer_kinds.size()),
                "ExpectedLayerTensors: layer out of range");
  const uint64_t hidden = config.hidden_size;
  std::vector<ExpectedTensor> tensors;
  tensors.push_back({LayerTensor(layer, "attn_norm"), {hidden}});
  if (config.hybrid->layer_kinds[layer] == LayerKind::kAttention) {
    AddAttention(config, layer, &tensors);
  } else {
    AddGatedDeltaNet(config, layer, forms, &tensors);
  }
  tensors.push_back({LayerTensor(layer, "post_attention_norm"), {hidden}});
  AddFfn(config, layer, forms, &tensors);
  return tensors;
}

absl::StatusOr<HybridTensorForms> CheckHybridTensors(const gguf::GgufFile& file,
                                                     const ModelConfig& config) {
  TESSERA_CHECK(config.hybrid.has_value(), "CheckHybridTensors needs a hybrid config");
  TESSERA_RETURN_IF_ERROR(CheckGlobalTensors(file, config));
  const HybridTensorForms forms = DetectForms(file, config);
  for (int layer = 0; layer < config.num_layers; ++layer) {
    for (const ExpectedTensor& expected : ExpectedLayerTensors(config, layer, forms)) {
      TESSERA_RETURN_IF_ERROR(CheckTensor(file, expected));
    }
  }
  return forms;
}

}  // namespace tessera::model
