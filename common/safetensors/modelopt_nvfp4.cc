#include "common/safetensors/modelopt_nvfp4.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/gguf/ocp_small_floats.h"
#include "common/util/status_macros.h"

namespace tessera::safetensors {
namespace {

using Json = nlohmann::json;

constexpr int kGroupSize = 16;
constexpr int kGgufBlockElements = 64;  // ggml's QK_NVFP4: four groups
constexpr int kGgufBlockBytes = 4 + kGgufBlockElements / 2;

// The quantization object: hf_quant_config.json's "quantization", else config.json's
// "quantization_config"; nullopt when neither exists.
absl::StatusOr<std::optional<Json>> QuantizationObject(const HfDirectory& dir) {
  TESSERA_ASSIGN_OR_RETURN(const std::optional<Json> hf_quant,
                           dir.ReadOptionalJson("hf_quant_config.json"));
  if (hf_quant) {
    const auto it = hf_quant->find("quantization");
    if (it == hf_quant->end() || !it->is_object()) {
      return absl::InvalidArgumentError("hf_quant_config.json has no quantization object");
    }
    return std::optional<Json>(*it);
  }
  const auto it = dir.config().find("quantization_config");
  if (it == dir.config().end() || it->is_null()) return std::optional<Json>();
  if (!it->is_object()) {
    return absl::InvalidArgumentError("config.json: quantization_config is not an object");
  }
  const std::string method = it->value("quant_method", std::string("modelopt"));
  if (method != "modelopt") {
    return absl::UnimplementedError(absl::StrCat("config.json: quantization_config quant_method '",
                                                 method, "' is not supported (only modelopt)"));
  }
  return std::optional<Json>(*it);
}

absl::Status Bad(const SafetensorsTensor& tensor, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("NVFP4 tensor '", tensor.name, "' (", std::string(DtypeName(tensor.dtype)), " [",
                   absl::StrJoin(tensor.shape, ", "), "]): ", std::string(what)));
}

absl::Status CheckLayout(const SafetensorsTensor& weight, const SafetensorsTensor& scale,
                         const SafetensorsTensor& scale_2) {
  if (weight.dtype != Dtype::kU8 || weight.shape.size() != 2) {
    return Bad(weight, "the weight must be U8 [N, K/2]");
  }
  const uint64_t cols = 2 * weight.shape[1];
  if (cols % kGroupSize != 0) return Bad(weight, "K is not a multiple of the group size 16");
  if (scale.dtype != Dtype::kF8E4M3 || scale.shape.size() != 2 ||
      scale.shape[0] != weight.shape[0] || scale.shape[1] != cols / kGroupSize) {
    return Bad(scale, absl::StrCat("weight_scale must be F8_E4M3 [", weight.shape[0], ", ",
                                   cols / kGroupSize, "]"));
  }
  if (scale_2.dtype != Dtype::kF32 || scale_2.num_elements != 1) {
    return Bad(scale_2, "weight_scale_2 must be one F32 value");
  }
  return absl::OkStatus();
}

float GlobalScale(const SafetensorsTensor& weight_scale_2) {
  float global = 0.0f;
  std::memcpy(&global, weight_scale_2.data.data(), sizeof(float));
  return global;
}

absl::Status CheckNoNanScale(const SafetensorsTensor& weight_scale) {
  for (uint64_t i = 0; i < weight_scale.num_elements; ++i) {
    if ((weight_scale.data[i] & 0x7F) == 0x7F) {
      const uint64_t groups = weight_scale.shape[1];
      return Bad(weight_scale, absl::StrCat("scale [", i / groups, ", ", i % groups, "] is NaN"));
    }
  }
  return absl::OkStatus();
}

// One ggml block from a row's 64 elements starting at group `first_group` of row `row`: scale
// bytes as they are (checked sign-free), and the nibbles regrouped from ModelOpt's adjacent pairs
// (element 2i low, 2i + 1 high) to ggml's halves (element j low, j + 8 high, per 16).
void WriteGgufBlock(const SafetensorsTensor& weight, const SafetensorsTensor& weight_scale,
                    uint64_t row, uint64_t first_group, uint8_t* block) {
  const uint64_t groups_per_row = weight_scale.shape[1];
  const uint64_t bytes_per_row = weight.shape[1];
  for (int s = 0; s < kGgufBlockElements / kGroupSize; ++s) {
    block[s] = weight_scale.data[row * groups_per_row + first_group + s] & 0x7F;
    const uint8_t* codes = &weight.data[row * bytes_per_row + (first_group + s) * kGroupSize / 2];
    uint8_t* qs = block + 4 + s * kGroupSize / 2;
    for (int j = 0; j < kGroupSize / 2; ++j) {
      const uint8_t low = (codes[j / 2] >> (4 * (j % 2))) & 0xF;
      const uint8_t high = (codes[(j + 8) / 2] >> (4 * (j % 2))) & 0xF;
      qs[j] = static_cast<uint8_t>(low | high << 4);
    }
  }
}

}  // namespace

absl::StatusOr<bool> IsModelOptNvfp4(const HfDirectory& dir) {
  TESSERA_ASSIGN_OR_RETURN(const std::optional<Json> quantization, QuantizationObject(dir));
  if (!quantization) return false;
  const std::string algo = quantization->value("quant_algo", std::string());
  if (algo != "NVFP4") {
    return absl::UnimplementedError(
        absl::StrCat("ModelOpt quant_algo '", algo, "' is not supported (only NVFP4)"));
  }
  const Json group = quantization->value("group_size", Json(kGroupSize));
  if (group != Json(kGroupSize)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ModelOpt NVFP4 group_size ", group.dump(), " is not 16"));
  }
  return true;
}

bool IsModelOptCompanionTensor(std::string_view name) {
  for (std::string_view suffix :
       {".weight_scale", ".weight_scale_2", ".input_scale", ".k_scale", ".v_scale"}) {
    if (name.ends_with(suffix)) return true;
  }
  return false;
}

absl::StatusOr<std::vector<float>> DequantizeModelOptNvfp4(
    const SafetensorsTensor& weight, const SafetensorsTensor& weight_scale,
    const SafetensorsTensor& weight_scale_2) {
  TESSERA_RETURN_IF_ERROR(CheckLayout(weight, weight_scale, weight_scale_2));
  const uint64_t rows = weight.shape[0];
  const uint64_t cols = 2 * weight.shape[1];
  const float global = GlobalScale(weight_scale_2);
  std::vector<float> values(rows * cols);
  for (uint64_t r = 0; r < rows; ++r) {
    for (uint64_t g = 0; g < cols / kGroupSize; ++g) {
      const float scale = gguf::ocp::E4M3ToFloat(weight_scale.data[r * (cols / kGroupSize) + g]);
      if (std::isnan(scale))
        return Bad(weight_scale, absl::StrCat("scale [", r, ", ", g, "] is NaN"));
      for (int i = 0; i < kGroupSize; i += 2) {
        const uint64_t col = g * kGroupSize + i;
        const uint8_t byte = weight.data[(r * cols + col) / 2];
        values[r * cols + col] = gguf::ocp::E2M1ToFloat(byte & 0xF) * scale * global;
        values[r * cols + col + 1] = gguf::ocp::E2M1ToFloat(byte >> 4) * scale * global;
      }
    }
  }
  return values;
}

absl::StatusOr<std::optional<GgufNvfp4Weight>> RepackModelOptNvfp4AsGguf(
    const SafetensorsTensor& weight, const SafetensorsTensor& weight_scale,
    const SafetensorsTensor& weight_scale_2) {
  TESSERA_RETURN_IF_ERROR(CheckLayout(weight, weight_scale, weight_scale_2));
  TESSERA_RETURN_IF_ERROR(CheckNoNanScale(weight_scale));
  const uint64_t rows = weight.shape[0];
  const uint64_t cols = 2 * weight.shape[1];
  if (cols % kGgufBlockElements != 0) return std::optional<GgufNvfp4Weight>();
  for (uint8_t byte : weight_scale.data) {
    if (byte > 0x80) return std::optional<GgufNvfp4Weight>();  // negative: not UE4M3
  }
  GgufNvfp4Weight out{.blocks = std::vector<uint8_t>(rows * cols / kGgufBlockElements *
                                                     kGgufBlockBytes),
                      .tensor_scale = GlobalScale(weight_scale_2)};
  uint8_t* block = out.blocks.data();
  for (uint64_t r = 0; r < rows; ++r) {
    for (uint64_t g = 0; g < cols / kGroupSize; g += kGgufBlockElements / kGroupSize) {
      WriteGgufBlock(weight, weight_scale, r, g, block);
      block += kGgufBlockBytes;
    }
  }
  return std::optional<GgufNvfp4Weight>(std::move(out));
}

}  // namespace tessera::safetensors
