#include "tools/convert/hf_export.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/gguf/dequantize.h"
#include "common/model/model_config.h"
#include "common/safetensors/hf_tensor_names.h"
#include "common/safetensors/safetensors_writer.h"
#include "common/util/status_macros.h"
#include "nlohmann/json.hpp"
#include "tools/convert/hf_export_tokenizer.h"
#include "tools/convert/nvfp4_encoder.h"

namespace tessera::convert {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using safetensors::Dtype;

struct HfTensor {
  std::string name;
  Dtype dtype;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> data;
};

std::optional<std::string> HfArchitecture(const std::string& arch) {
  if (arch == "llama") return "LlamaForCausalLM";
  if (arch == "qwen2") return "Qwen2ForCausalLM";
  if (arch == "qwen3") return "Qwen3ForCausalLM";
  return std::nullopt;
}

absl::StatusOr<Json> ConfigJson(const model::ModelConfig& c) {
  const std::optional<std::string> hf_arch = HfArchitecture(c.architecture);
  if (!hf_arch) {
    return absl::UnimplementedError(
        absl::StrCat("HF export: architecture '", c.architecture, "' (only llama, qwen2, qwen3)"));
  }
  if (c.rope_scaling.type != model::RopeScalingType::kNone || c.rope_dim != c.head_dim) {
    return absl::UnimplementedError("HF export: rope scaling or partial rotation");
  }
  Json config = {{"architectures", Json::array({*hf_arch})},
                 {"model_type", c.architecture},
                 {"hidden_size", c.hidden_size},
                 {"intermediate_size", c.ffn_size},
                 {"num_hidden_layers", c.num_layers},
                 {"num_attention_heads", c.num_heads},
                 {"num_key_value_heads", c.num_kv_heads},
                 {"max_position_embeddings", c.context_length},
                 {"rms_norm_eps", c.rms_norm_eps},
                 {"rope_theta", c.rope_theta},
                 {"vocab_size", c.vocab_size},
                 {"tie_word_embeddings", c.tied_embeddings},
                 {"hidden_act", "silu"},
                 {"torch_dtype", "float32"}};
  if (c.head_dim * c.num_heads != c.hidden_size) config["head_dim"] = c.head_dim;
  return config;
}

// HF's row order for llama's Q/K: HF row h·d + j·d/2 + i comes from GGUF row h·d + 2i + j.
std::vector<uint8_t> UnpermuteHeads(std::span<const uint8_t> bytes, uint64_t rows, int head_dim) {
  const size_t row_bytes = bytes.size() / rows;
  std::vector<uint8_t> out(bytes.size());
  for (uint64_t row = 0; row < rows; ++row) {
    const uint64_t head = row / head_dim;
    const uint64_t r = row % head_dim;
    const uint64_t j = r / (head_dim / 2);
    const uint64_t i = r % (head_dim / 2);
    const uint64_t from = head * head_dim + 2 * i + j;
    std::memcpy(out.data() + row * row_bytes, bytes.data() + from * row_bytes, row_bytes);
  }
  return out;
}

bool IsLlamaRotated(const model::ModelConfig& c, const std::string& name) {
  if (c.rope_neox) return false;
  for (const char* suffix : {".attn_q.weight", ".attn_k.weight", ".attn_q.bias", ".attn_k.bias"}) {
    if (name.ends_with(suffix)) return true;
  }
  return false;
}

// The tensor's bytes in a float type HF stores (F32, F16, BF16 kept; others dequantized).
absl::StatusOr<std::pair<gguf::GgmlType, std::vector<uint8_t>>> FloatBytes(
    const gguf::GgufFile& file, const gguf::GgufTensorInfo& t) {
  const std::span<const uint8_t> data = file.TensorData(t);
  if (t.type == gguf::GgmlType::kF32 || t.type == gguf::GgmlType::kF16 ||
      t.type == gguf::GgmlType::kBF16) {
    return std::pair{t.type, std::vector<uint8_t>(data.begin(), data.end())};
  }
  TESSERA_ASSIGN_OR_RETURN(const std::vector<float> values,
                           gguf::DequantizeToF32(t.type, data, t.num_elements));
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return std::pair{gguf::GgmlType::kF32, std::move(bytes)};
}

Dtype DtypeOf(gguf::GgmlType type) {
  return type == gguf::GgmlType::kF32   ? Dtype::kF32
         : type == gguf::GgmlType::kF16 ? Dtype::kF16
                                        : Dtype::kBF16;
}

std::vector<uint8_t> FloatsAsBytes(std::span<const float> values) {
  std::vector<uint8_t> bytes(values.size_bytes());
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// The ModelOpt tensors of one quantized linear `hf_name` ("....weight"), [rows, cols] f32.
void AppendNvfp4(const std::string& hf_name, std::span<const float> values, uint64_t rows,
                 uint64_t cols, std::vector<HfTensor>* out) {
  const Nvfp4Matrix m = EncodeNvfp4(values, rows, cols);
  const std::string module = hf_name.substr(0, hf_name.size() - std::string(".weight").size());
  const float one = 1.0f;
  out->push_back({hf_name, Dtype::kU8, {rows, cols / 2}, m.codes});
  out->push_back({module + ".weight_scale", Dtype::kF8E4M3, {rows, cols / 16}, m.scales});
  out->push_back(
      {module + ".weight_scale_2", Dtype::kF32, {}, FloatsAsBytes({&m.global_scale, 1})});
  out->push_back({module + ".input_scale", Dtype::kF32, {}, FloatsAsBytes({&one, 1})});
}

absl::Status AppendTensor(const gguf::GgufFile& file, const gguf::GgufTensorInfo& t,
                          const model::ModelConfig& c, bool nvfp4, std::vector<HfTensor>* out) {
  const std::optional<std::string> hf_name = safetensors::HfTensorName(t.name);
  if (!hf_name) {
    return absl::UnimplementedError(absl::StrCat("HF export: tensor '", t.name, "'"));
  }
  TESSERA_ASSIGN_OR_RETURN(auto typed, FloatBytes(file, t));
  auto& [type, bytes] = typed;
  if (IsLlamaRotated(c, t.name)) {
    bytes = UnpermuteHeads(bytes, t.dims.size() == 1 ? t.dims[0] : t.dims[1], c.head_dim);
  }
  const std::vector<uint64_t> shape(t.dims.rbegin(), t.dims.rend());
  if (!nvfp4 || !IsNvfp4Linear(t.name)) {
    out->push_back({*hf_name, DtypeOf(type), shape, std::move(bytes)});
    return absl::OkStatus();
  }
  TESSERA_ASSIGN_OR_RETURN(const std::vector<float> values,
                           gguf::DequantizeToF32(type, bytes, t.num_elements));
  AppendNvfp4(*hf_name, values, shape[0], shape[1], out);
  return absl::OkStatus();
}

absl::Status WriteJson(const fs::path& path, const Json& json) {
  std::ofstream out(path, std::ios::trunc);
  out << json.dump(2) << "\n";
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write '", path.string(), "'"));
  return absl::OkStatus();
}

// Each shard's tensors in order of decreasing element size keep every tensor aligned to it.
absl::Status WriteShards(std::vector<HfTensor> tensors, int num_shards, const fs::path& dir) {
  std::vector<std::vector<HfTensor>> shards(num_shards);
  for (size_t i = 0; i < tensors.size(); ++i) {
    shards[i * num_shards / tensors.size()].push_back(std::move(tensors[i]));
  }
  Json weight_map = Json::object();
  uint64_t total = 0;
  for (int s = 0; s < num_shards; ++s) {
    const std::string name =
        num_shards == 1 ? "model.safetensors"
                        : absl::StrFormat("model-%05d-of-%05d.safetensors", s + 1, num_shards);
    std::stable_sort(shards[s].begin(), shards[s].end(), [](const HfTensor& a, const HfTensor& b) {
      return safetensors::DtypeSize(a.dtype) > safetensors::DtypeSize(b.dtype);
    });
    safetensors::SafetensorsWriter writer;
    for (HfTensor& t : shards[s]) {
      weight_map[t.name] = name;
      total += t.data.size();
      writer.Add(t.name, t.dtype, t.shape, t.data);
    }
    TESSERA_RETURN_IF_ERROR(writer.WriteToFile((dir / name).string()));
  }
  if (num_shards == 1) return absl::OkStatus();
  return WriteJson(dir / "model.safetensors.index.json",
                   {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}});
}

Json HfQuantConfig() {
  return {{"producer", {{"name", "modelopt"}, {"version", "tessera-tiny"}}},
          {"quantization",
           {{"quant_algo", "NVFP4"},
            {"kv_cache_quant_algo", nullptr},
            {"group_size", 16},
            {"exclude_modules", Json::array({"lm_head"})}}}};
}

}  // namespace

absl::Status ExportHfDirectory(const gguf::GgufFile& file, const HfExportOptions& options,
                               const std::string& dir) {
  if (options.num_shards < 1) {
    return absl::InvalidArgumentError(absl::StrCat("HF export: ", options.num_shards, " shards"));
  }
  TESSERA_ASSIGN_OR_RETURN(const model::ModelConfig config, model::ReadModelConfig(file));
  if (file.FindTensor("rope_freqs.weight") != nullptr) {
    return absl::UnimplementedError("HF export: rope_freqs.weight");
  }
  TESSERA_ASSIGN_OR_RETURN(const Json config_json, ConfigJson(config));
  std::vector<HfTensor> tensors;
  for (const gguf::GgufTensorInfo& t : file.tensors()) {
    TESSERA_RETURN_IF_ERROR(AppendTensor(file, t, config, options.nvfp4, &tensors));
  }
  const fs::path root(dir);
  std::error_code error;
  fs::create_directories(root, error);
  if (error)
    return absl::InternalError(absl::StrCat("cannot create '", dir, "': ", error.message()));
  TESSERA_RETURN_IF_ERROR(WriteJson(root / "config.json", config_json));
  if (options.nvfp4)
    TESSERA_RETURN_IF_ERROR(WriteJson(root / "hf_quant_config.json", HfQuantConfig()));
  TESSERA_RETURN_IF_ERROR(WriteShards(std::move(tensors), options.num_shards, root));
  return WriteHfTokenizerFiles(file, dir);
}

}  // namespace tessera::convert
