// Writes a dense GGUF model (llama, qwen2, qwen3) as a Hugging Face safetensors directory that
// computes the same thing: its "HF twin", for the tests of common/safetensors and for
// `tessera-make-tiny-model --format safetensors|modelopt-nvfp4`. The reverse of what llama.cpp's
// convert_hf_to_gguf.py does:
//   config.json             from the model config (architectures, sizes, rms_norm_eps,
//                           rope_theta, tie_word_embeddings when there is no output.weight)
//   tensors                 HF names (common/safetensors/hf_tensor_names.h), shape = reversed
//                           dims; F32 / F16 / BF16 kept, other types dequantized to F32; llama's
//                           attn_q / attn_k rows (and biases) un-permuted back to HF's layout
//                           (GGUF row h·d + 2i + j holds HF row h·d + j·d/2 + i, d = head_dim)
//   model.safetensors       or, with num_shards > 1, model-0000k-of-0000n.safetensors and
//                           model.safetensors.index.json (tensors dealt out in order)
//   tokenizer files         hf_export_tokenizer.h
//   nvfp4                   the IsNvfp4Linear matrices in ModelOpt NVFP4 (weight, weight_scale,
//                           weight_scale_2, input_scale; nvfp4_encoder.h) and hf_quant_config.json
// UNIMPLEMENTED for what the export does not carry (rope scaling, partial rotation,
// rope_freqs, a hybrid or unknown architecture). Pure function; thread-safe.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "common/gguf/gguf_file.h"

namespace tessera::convert {

struct HfExportOptions {
  int num_shards = 1;
  bool nvfp4 = false;
};

// Creates `dir` if needed and writes the directory into it.
absl::Status ExportHfDirectory(const gguf::GgufFile& file, const HfExportOptions& options,
                               const std::string& dir);

}  // namespace tessera::convert
