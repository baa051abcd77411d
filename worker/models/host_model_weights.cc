#include "worker/models/host_model_weights.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/gguf/dequantize.h"
#include "common/util/status_macros.h"
#include "kernels/cpu/matmul.h"

namespace tessera::worker {
namespace {

namespace cpu = kernels::cpu;

// ggml compares all four dims, absent ones counting as 1.
bool SameShape(const std::vector<uint64_t>& actual, const std::vector<uint64_t>& expected) {
  for (size_t i = 0; i < static_cast<size_t>(gguf::kGgufMaxDims); ++i) {
    const uint64_t a = i < actual.size() ? actual[i] : 1;
    const uint64_t e = i < expected.size() ? expected[i] : 1;
    if (a != e) return false;
  }
  return true;
}

// The per-tensor scale llama.cpp's converter writes beside an NVFP4 matrix `X.weight`: the F32
// tensor `X.scale` ([1]; [experts] for an expert stack, one per expert), which multiplies the
// matmul output (docs/design/fp4-formats.md). Empty when the file has none. It becomes part of
// the weight (HostWeight::tensor_scale / expert_scales), applied by the backends; an embedding
// table's is refused (UNIMPLEMENTED), since the lookup would silently run without it.
absl::StatusOr<std::vector<float>> Nvfp4TensorScales(const gguf::GgufFile& file,
                                                     const WeightSpec& spec) {
  const gguf::GgufTensorInfo* info = file.FindTensor(spec.name);
  constexpr std::string_view kSuffix = ".weight";
  if (info == nullptr || info->type != gguf::GgmlType::kNvfp4 || !spec.name.ends_with(kSuffix)) {
    return std::vector<float>();
  }
  const std::string name = spec.name.substr(0, spec.name.size() - kSuffix.size()) + ".scale";
  const gguf::GgufTensorInfo* scale = file.FindTensor(name);
  if (scale == nullptr) return std::vector<float>();
  if (spec.role != WeightRole::kMatrix && spec.role != WeightRole::kExperts) {
    return absl::UnimplementedError(absl::StrCat(
        "tensor '", spec.name, "' is NVFP4 with scales '", name,
        "', which an embedding lookup does not apply yet"));
  }
  const int64_t count = spec.role == WeightRole::kExperts ? spec.experts() : 1;
  if (scale->type != gguf::GgmlType::kF32 || scale->num_elements != static_cast<uint64_t>(count)) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' must be ", count,
                                                   " F32 value(s) (the tensor scale of '",
                                                   spec.name, "')"));
  }
  std::vector<float> values(static_cast<size_t>(count));
  std::memcpy(values.data(), file.TensorData(*scale).data(), values.size() * sizeof(float));
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i]) || !(values[i] > 0.0f)) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' [", i, "] = ", values[i],
                                                     " must be finite and positive"));
    }
  }
  return values;
}

// Resolves one declared tensor at a time and keeps the f32 copies it has to make.
class TensorBinder {
 public:
  TensorBinder(const gguf::GgufFile& file, HostModelWeights* weights)
      : file_(file), weights_(weights) {}

  absl::StatusOr<HostWeight> Bind(const WeightSpec& spec) {
    HostWeight weight;  // present = false
    weight.role = spec.role;
    const gguf::GgufTensorInfo* info = file_.FindTensor(spec.name);
    if (info == nullptr && spec.optional) return weight;
    TESSERA_RETURN_IF_ERROR(CheckShape(spec, info));
    weight.present = true;
    if (spec.role == WeightRole::kDense) {
      TESSERA_ASSIGN_OR_RETURN(weight.values, Values(*info));
      if (spec.positive) TESSERA_RETURN_IF_ERROR(CheckPositive(spec.name, weight.values));
      return weight;
    }
    TESSERA_ASSIGN_OR_RETURN(const MatmulData data, Matmul(*info));
    TESSERA_ASSIGN_OR_RETURN(std::vector<float> scales, Nvfp4TensorScales(file_, spec));
    if (spec.role != WeightRole::kExperts) {
      weight.matrix = {data.format, data.data, spec.rows(), spec.cols()};
      if (!scales.empty()) weight.tensor_scale = scales[0];
    } else {
      weight.expert_scales = std::move(scales);
      weight.experts = {.format = data.format, .data = data.data, .num_experts = spec.experts(),
                        .rows = spec.rows(), .cols = spec.cols()};
    }
    return weight;
  }

 private:
  struct MatmulData {
    cpu::WeightFormat format;
    const void* data;
  };

  static absl::Status CheckShape(const WeightSpec& spec, const gguf::GgufTensorInfo* info) {
    if (info == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("model has no tensor '", spec.name, "'"));
    }
    if (!SameShape(info->dims, spec.dims)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", spec.name, "' has dims [", absl::StrJoin(info->dims, ", "),
          "], the hyper-parameters say [", absl::StrJoin(spec.dims, ", "), "]"));
    }
    return absl::OkStatus();
  }

  static absl::Status CheckPositive(const std::string& name, std::span<const float> values) {
    for (size_t i = 0; i < values.size(); ++i) {
      if (!std::isfinite(values[i]) || !(values[i] > 0.0f)) {
        return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' [", i, "] = ",
                                                       values[i], " must be finite and positive"));
      }
    }
    return absl::OkStatus();
  }

  // The file's bytes when the matmul reads the format, else an f32 copy.
  absl::StatusOr<MatmulData> Matmul(const gguf::GgufTensorInfo& info) {
    const std::optional<cpu::WeightFormat> format = cpu::WeightFormatFromGgml(info.type);
    if (format.has_value() && cpu::MatmulSupportsFormat(*format)) {
      return MatmulData{*format, file_.TensorData(info).data()};
    }
    TESSERA_ASSIGN_OR_RETURN(const std::span<const float> values, Dequantized(info));
    return MatmulData{cpu::WeightFormat::kF32, values.data()};
  }

  absl::StatusOr<std::span<const float>> Values(const gguf::GgufTensorInfo& info) {
    if (info.type == gguf::GgmlType::kF32) {
      const std::span<const uint8_t> bytes = file_.TensorData(info);
      return std::span<const float>(reinterpret_cast<const float*>(bytes.data()),
                                    static_cast<size_t>(info.num_elements));
    }
    return Dequantized(info);
  }

  absl::StatusOr<std::span<const float>> Dequantized(const gguf::GgufTensorInfo& info) {
    cpu::AlignedVector<float>& copy = weights_->owned.emplace_back(info.num_elements);
    const absl::Status status = gguf::DequantizeToF32(info.type, file_.TensorData(info),
                                                      info.num_elements, std::span<float>(copy));
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("tensor '", info.name, "': ", status.message()));
    }
    weights_->num_dequantized_bytes += static_cast<int64_t>(copy.size() * sizeof(float));
    return std::span<const float>(copy);
  }

  const gguf::GgufFile& file_;
  HostModelWeights* weights_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<HostModelWeights>> BindHostWeights(
    const gguf::GgufFile& file, const WeightDeclaration& declaration) {
  auto weights = std::make_unique<HostModelWeights>();
  TensorBinder binder(file, weights.get());
  for (const WeightSpec& spec : declaration.specs()) {
    TESSERA_ASSIGN_OR_RETURN(HostWeight weight, binder.Bind(spec));
    weights->tensors.push_back(weight);
  }
  return weights;
}

}  // namespace tessera::worker
