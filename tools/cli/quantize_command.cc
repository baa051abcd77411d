// `tessera quantize --to nvfp4|q8_0 IN OUT`: the recipe of tools/quantize/quantize_plan.h over
// a model (a GGUF file, or a Hugging Face directory read as its GGUF), streamed to OUT with a
// progress bar on a terminal and a summary on stdout.
#include <cstdio>
#include <memory>

#include "absl/strings/str_format.h"
#include "common/gguf/gguf_file.h"
#include "common/safetensors/model_file.h"
#include "tools/cli/commands.h"
#include "tools/quantize/progress_bar.h"
#include "tools/quantize/quantize_model.h"
#include "tools/quantize/quantize_plan.h"

namespace tessera::cli {

absl::Status RunQuantize(const QuantizeCommandOptions& options) {
  absl::StatusOr<gguf::GgmlType> target = quantize::ParseQuantizeTarget(options.target);
  if (!target.ok()) return target.status();
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> in =
      safetensors::OpenModelFile(options.input_path, util::FileLoad::kMap);
  if (!in.ok()) return in.status();
  const quantize::QuantizeOptions recipe{.target = *target,
                                         .quantize_embeddings = options.quantize_embeddings,
                                         .quantize_output = options.quantize_output};
  absl::StatusOr<std::vector<quantize::TensorDecision>> plan =
      quantize::PlanQuantization(**in, recipe);
  if (!plan.ok()) return plan.status();
  quantize::TerminalProgressBar bar(stderr);
  absl::StatusOr<quantize::QuantizeSummary> summary = quantize::QuantizeModel(
      **in, *plan, options.output_path,
      [&bar](const quantize::QuantizeProgress& p) { bar.Update(p); });
  if (!summary.ok()) return summary.status();
  const double bits = summary->quantized_elements == 0
                          ? 0.0
                          : 8.0 * static_cast<double>(summary->quantized_output_bytes) /
                                static_cast<double>(summary->quantized_elements);
  std::printf("%s: %d tensors quantized to %s (%.2f bits per weight), %d kept; "
              "%.1f MB -> %.1f MB of tensor data\n",
              options.output_path.c_str(), summary->quantized,
              gguf::GgmlTypeName(*target).c_str(), bits, summary->copied,
              static_cast<double>(summary->input_bytes) / 1e6,
              static_cast<double>(summary->output_bytes) / 1e6);
  return absl::OkStatus();
}

}  // namespace tessera::cli
