// PlanQuantization: the recipe of quantize_plan.h, tensor by tensor.
#include "tools/quantize/quantize_plan.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/gguf/dequantize.h"
#include "common/util/absl_compat.h"

namespace tessera::quantize {
namespace {

// Why a tensor keeps its type under `options`, or "" when the recipe quantizes it.
std::string KeepReason(const gguf::GgufTensorInfo& t, const QuantizeOptions& options) {
  if (t.name == "token_embd.weight") {
    if (options.target == gguf::GgmlType::kNvfp4) {
      return "token embedding (an NVFP4 lookup does not apply a tensor scale yet)";
    }
    return options.quantize_embeddings ? "" : "token embedding (--quantize-embeddings)";
  }
  if (t.name == "output.weight") return options.quantize_output ? "" : "output head (--quantize-output)";
  if (!absl::StartsWith(t.name, "blk.") || !absl::EndsWith(t.name, ".weight")) {
    return "not a block weight";
  }
  if (t.dims.size() < 2) return "a vector (norm or per-channel constant)";
  if (absl::StrContains(t.name, "_norm") || absl::StrContains(t.name, "conv1d")) {
    return "norm or convolution kernel";
  }
  const uint32_t block = gguf::GetGgmlTypeInfo(options.target).block_size;
  if (t.dims[0] % block != 0) {
    return absl::StrCat("rows of ", t.dims[0], " are not a multiple of ", block);
  }
  return "";
}

}  // namespace

absl::StatusOr<gguf::GgmlType> ParseQuantizeTarget(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(util::ToAbsl(name));
  if (lower == "q8_0") return gguf::GgmlType::kQ8_0;
  if (lower == "nvfp4") return gguf::GgmlType::kNvfp4;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown quantization target '", util::ToAbsl(name), "': use nvfp4 or q8_0"));
}

absl::StatusOr<std::vector<TensorDecision>> PlanQuantization(const gguf::GgufFile& file,
                                                             const QuantizeOptions& options) {
  std::vector<TensorDecision> plan;
  plan.reserve(file.tensors().size());
  for (const gguf::GgufTensorInfo& t : file.tensors()) {
    TensorDecision d{&t, TensorAction::kCopy, t.type, KeepReason(t, options)};
    if (d.reason.empty() && t.type == options.target) d.reason = "already the target type";
    if (d.reason.empty()) {
      if (!gguf::CanDequantize(t.type)) {
        return absl::FailedPreconditionError(
            absl::StrCat("tensor '", t.name, "' is ", gguf::GgmlTypeName(t.type),
                         ", which cannot be dequantized to requantize it"));
      }
      d.action = TensorAction::kQuantize;
      d.output_type = options.target;
      if (options.target == gguf::GgmlType::kNvfp4) {
        d.scale_name = t.name.substr(0, t.name.size() - std::string_view(".weight").size()) +
                       ".scale";
        d.scale_count = t.dims.size() > 2 ? t.dims[2] : 1;
      }
    }
    plan.push_back(std::move(d));
  }
  return plan;
}

}  // namespace tessera::quantize
