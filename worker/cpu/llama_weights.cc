#include "worker/cpu/llama_weights.h"

#include <cmath>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/gguf/dequantize.h"
#include "common/util/status_macros.h"
#include "kernels/cpu/matmul.h"

namespace tessera::worker {
namespace {

using kernels::cpu::WeightFormat;
using kernels::cpu::WeightView;

// Resolves tensors by name, checks their shapes and keeps the f32 copies it has to make.
class TensorBinder {
 public:
  TensorBinder(const gguf::GgufFile& file, LlamaWeights* weights) : file_(file), weights_(weights) {}

  // A matrix with GGUF dims [cols, rows].
  absl::StatusOr<WeightView> Matrix(const std::string& name, int64_t rows, int64_t cols) {
    absl::StatusOr<const gguf::GgufTensorInfo*> info = Find(name, {cols, rows});
    if (!info.ok()) return info.status();
    std::optional<WeightFormat> format = kernels::cpu::WeightFormatFromGgml((*info)->type);
    if (format.has_value() && kernels::cpu::MatmulSupportsFormat(*format)) {
      return WeightView{*format, file_.TensorData(**info).data(), rows, cols};
    }
    absl::StatusOr<std::span<const float>> values = Dequantized(**info);
    if (!values.ok()) return values.status();
    return WeightView{WeightFormat::kF32, values->data(), rows, cols};
  }

  // A vector of `size` values, as f32. `optional` tensors that are absent give an empty span.
  absl::StatusOr<std::span<const float>> Vector(const std::string& name, int64_t size,
                                                bool optional = false) {
    if (optional && file_.FindTensor(name) == nullptr) return std::span<const float>();
    absl::StatusOr<const gguf::GgufTensorInfo*> info = Find(name, {size});
    if (!info.ok()) return info.status();
    if ((*info)->type == gguf::GgmlType::kF32) {
      std::span<const uint8_t> bytes = file_.TensorData(**info);
      return std::span<const float>(reinterpret_cast<const float*>(bytes.data()), size);
    }
    return Dequantized(**info);
  }

 private:
  absl::StatusOr<const gguf::GgufTensorInfo*> Find(const std::string& name,
                                                   const std::vector<uint64_t>& dims) {
    const gguf::GgufTensorInfo* info = file_.FindTensor(name);
    if (info == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("model has no tensor '", name, "'"));
    }
    if (info->dims != dims) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", name, "' has dims [", absl::StrJoin(info->dims, ", "),
          "], the hyper-parameters say [", absl::StrJoin(dims, ", "), "]"));
    }
    return info;
  }

  absl::StatusOr<std::span<const float>> Dequantized(const gguf::GgufTensorInfo& info) {
    kernels::cpu::AlignedVector<float>& copy = weights_->owned.emplace_back(info.num_elements);
    absl::Status status = gguf::DequantizeToF32(info.type, file_.TensorData(info),
                                                info.num_elements, std::span<float>(copy));
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("tensor '", info.name, "': ", status.message()));
    }
    weights_->num_dequantized_bytes += static_cast<int64_t>(copy.size() * sizeof(float));
    return std::span<const float>(copy);
  }

  const gguf::GgufFile& file_;
  LlamaWeights* weights_;
};

absl::Status BindLayer(TensorBinder& binder, const model::ModelConfig& c, int index,
                       LlamaLayerWeights* layer) {
  const std::string p = absl::StrCat("blk.", index, ".");
  const int64_t q_dim = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv_dim = int64_t{c.num_kv_heads} * c.head_dim;
  TESSERA_ASSIGN_OR_RETURN(layer->attn_norm, binder.Vector(p + "attn_norm.weight", c.hidden_size));
  TESSERA_ASSIGN_OR_RETURN(layer->wq, binder.Matrix(p + "attn_q.weight", q_dim, c.hidden_size));
  TESSERA_ASSIGN_OR_RETURN(layer->wk, binder.Matrix(p + "attn_k.weight", kv_dim, c.hidden_size));
  TESSERA_ASSIGN_OR_RETURN(layer->wv, binder.Matrix(p + "attn_v.weight", kv_dim, c.hidden_size));
  TESSERA_ASSIGN_OR_RETURN(layer->wo, binder.Matrix(p + "attn_output.weight", c.hidden_size, q_dim));
  TESSERA_ASSIGN_OR_RETURN(layer->bq, binder.Vector(p + "attn_q.bias", q_dim, /*optional=*/true));
  TESSERA_ASSIGN_OR_RETURN(layer->bk, binder.Vector(p + "attn_k.bias", kv_dim, /*optional=*/true));
  TESSERA_ASSIGN_OR_RETURN(layer->bv, binder.Vector(p + "attn_v.bias", kv_dim, /*optional=*/true));
  TESSERA_ASSIGN_OR_RETURN(layer->q_norm, binder.Vector(p + "attn_q_norm.weight", c.head_dim, true));
  TESSERA_ASSIGN_OR_RETURN(layer->k_norm, binder.Vector(p + "attn_k_norm.weight", c.head_dim, true));
  TESSERA_ASSIGN_OR_RETURN(layer->ffn_norm, binder.Vector(p + "ffn_norm.weight", c.hidden_size));
  TESSERA_ASSIGN_OR_RETURN(layer->w_gate, binder.Matrix(p + "ffn_gate.weight", c.ffn_size, c.hidden_size));
  TESSERA_ASSIGN_OR_RETURN(layer->w_up, binder.Matrix(p + "ffn_up.weight", c.ffn_size, c.hidden_size));
  TESSERA_ASSIGN_OR_RETURN(layer->w_down, binder.Matrix(p + "ffn_down.weight", c.hidden_size, c.ffn_size));
  return absl::OkStatus();
}

// rope_freqs.weight divides RoPE angles (ggml_rope_ext's freq_factors); zero, negative or
// non-finite divisors would silently produce garbage rotations, so they are rejected here.
absl::StatusOr<std::span<const float>> BindRopeFreqs(TensorBinder& binder,
                                                      const model::ModelConfig& c) {
  TESSERA_ASSIGN_OR_RETURN(std::span<const float> freqs,
                           binder.Vector("rope_freqs.weight", c.rope_dim / 2, /*optional=*/true));
  for (size_t i = 0; i < freqs.size(); ++i) {
    if (!std::isfinite(freqs[i]) || !(freqs[i] > 0.0f)) {
      return absl::InvalidArgumentError(absl::StrCat("tensor 'rope_freqs.weight' [", i, "] = ",
                                                     freqs[i], " must be finite and positive"));
    }
  }
  return freqs;
}

}  // namespace

bool IsLlamaFamily(const std::string& architecture) {
  return architecture == "llama" || architecture == "qwen2" || architecture == "qwen3";
}

absl::StatusOr<std::unique_ptr<LlamaWeights>> LoadLlamaWeights(const gguf::GgufFile& file,
                                                               const model::ModelConfig& config) {
  if (!IsLlamaFamily(config.architecture)) {
    return absl::UnimplementedError(absl::StrCat(
        "architecture '", config.architecture, "' is not supported (supported: llama, qwen2, qwen3)"));
  }
  auto weights = std::make_unique<LlamaWeights>();
  TensorBinder binder(file, weights.get());
  TESSERA_ASSIGN_OR_RETURN(weights->token_embd,
               binder.Matrix("token_embd.weight", config.vocab_size, config.hidden_size));
  TESSERA_ASSIGN_OR_RETURN(weights->output_norm, binder.Vector("output_norm.weight", config.hidden_size));
  if (config.tied_embeddings) {
    weights->output = weights->token_embd;
  } else {
    TESSERA_ASSIGN_OR_RETURN(weights->output,
                 binder.Matrix("output.weight", config.vocab_size, config.hidden_size));
  }
  TESSERA_ASSIGN_OR_RETURN(weights->rope_freqs, BindRopeFreqs(binder, config));
  weights->layers.resize(config.num_layers);
  for (int i = 0; i < config.num_layers; ++i) {
    if (absl::Status s = BindLayer(binder, config, i, &weights->layers[i]); !s.ok()) return s;
  }
  return weights;
}

}  // namespace tessera::worker
