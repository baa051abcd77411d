// Converts a GGUF model to another GGUF under a plan (quantize_plan.h), streaming: one tensor
// is in memory at a time (as f32 rows in chunks for the tensors being requantized), so an 8B
// model converts in a few GB of memory. The metadata is copied in order, with
// `general.file_type` updated (or dropped when the target has no llama.cpp file type) and
// `general.quantized_by` added.
//
// Threading: the caller's thread does all the work; `progress` is called on it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"
#include "tools/quantize/quantize_plan.h"

namespace tessera::quantize {

struct QuantizeProgress {
  size_t tensors_done = 0;
  size_t tensors_total = 0;
  uint64_t bytes_done = 0;   // input bytes of the tensors done
  uint64_t bytes_total = 0;  // input bytes of every tensor
  std::string_view current;  // the tensor being converted next ("" when done)
};
using ProgressCallback = std::function<void(const QuantizeProgress&)>;

struct QuantizeSummary {
  int quantized = 0;          // tensors requantized
  int copied = 0;             // tensors copied unchanged
  uint64_t input_bytes = 0;   // tensor data in
  uint64_t output_bytes = 0;  // tensor data out
  uint64_t quantized_elements = 0;
  uint64_t quantized_output_bytes = 0;  // of the requantized tensors
};

// Writes `out_path` (via out_path.partial; nothing is left under out_path on error). Errors name
// the tensor or the file.
absl::StatusOr<QuantizeSummary> QuantizeModel(const gguf::GgufFile& in,
                                              const std::vector<TensorDecision>& plan,
                                              const std::string& out_path,
                                              const ProgressCallback& progress = {});

}  // namespace tessera::quantize
