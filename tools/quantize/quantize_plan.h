// Which tensors `tessera quantize` converts, and to what: the policy of the standard recipes
// (llama.cpp's quantize, NVIDIA ModelOpt's NVFP4 export) in one pure function.
//
//   - the linear layers of the blocks (`blk.N.*.weight` with two or more dims: attention and
//     FFN projections, MoE expert stacks, the hybrids' SSM projections) go to the target type;
//   - the token embedding and the output head stay as they are unless asked (`--quantize-
//     embeddings`, `--quantize-output`): the head is the most logit-sensitive tensor;
//   - norms, biases, 1-D tensors, convolution kernels (`ssm_conv1d`) and per-head constants
//     stay as they are;
//   - a tensor whose rows are not a whole number of the target's blocks stays as it is (and is
//     reported), as llama.cpp does.
// A tensor already in the target type is copied unchanged.
// NVFP4 follows NVIDIA's two-level recipe (common/gguf/quantize_fp4.h): each converted matrix
// gets its per-tensor scale as the F32 sidecar `<name less .weight>.scale` that llama.cpp's
// converter writes (an expert stack one per expert, F32 [experts]); the token embedding stays as
// it is for NVFP4, since the embedding lookup does not apply such a scale yet.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf/ggml_type.h"
#include "common/gguf/gguf_file.h"

namespace tessera::quantize {

struct QuantizeOptions {
  gguf::GgmlType target = gguf::GgmlType::kQ8_0;
  bool quantize_embeddings = false;  // token_embd.weight too
  bool quantize_output = false;      // output.weight too
};

// "q8_0" / "nvfp4" (case-insensitive) -> the type; INVALID_ARGUMENT naming the accepted ones.
absl::StatusOr<gguf::GgmlType> ParseQuantizeTarget(std::string_view name);

enum class TensorAction {
  kQuantize,  // dequantize to f32, quantize to the target
  kCopy,      // bytes unchanged (kept by the policy, or already the target type)
};

struct TensorDecision {
  const gguf::GgufTensorInfo* tensor = nullptr;
  TensorAction action = TensorAction::kCopy;
  gguf::GgmlType output_type = gguf::GgmlType::kF32;
  std::string reason;  // why it is kept ("norm", "output head", "rows not a multiple of 64")
  std::string scale_name;  // NVFP4: the F32 sidecar written right after the tensor; "" none
  uint64_t scale_count = 0;  // its values: 1, or one per expert of a stack
};

// One decision per tensor of `file`, in file order. FAILED_PRECONDITION when the file's
// tensor types cannot be dequantized where the policy would quantize them (names the tensor).
absl::StatusOr<std::vector<TensorDecision>> PlanQuantization(const gguf::GgufFile& file,
                                                             const QuantizeOptions& options);

}  // namespace tessera::quantize
