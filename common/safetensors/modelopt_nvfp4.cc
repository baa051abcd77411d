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
  float global = 0.0f;
  std::memcpy(&global, weight_scale_2.data.data(), sizeof(float));
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

}  // namespace tessera::safetensors
