// A Hugging Face safetensors model directory presented as a GGUF model: a gguf::GgufFile
// assembled in memory (GgufFile::FromParts) with the metadata and tensors llama.cpp's converter
// would have written, so every GGUF reader (model config, tokenizer, chat template, weight
// binding, inspect) works unchanged.
//
//   metadata   config.json (hf_config.h), tokenizer files (hf_tokenizer_metadata.h), general.name
//              (the directory's name), and where it came from:
//                tessera.source.format  "safetensors"
//                tessera.source.shards  uint32, the number of .safetensors files
//                tessera.source.dtypes  "BF16 x290, F32 x2" (the stored dtypes, counted)
//   tensors    GGUF names (hf_tensor_names.h), dims reversed from the shape. F32 / F16 / BF16
//              become the same GGUF type with the bytes used in place (copied only when a tensor
//              is not aligned to its element size); ModelOpt NVFP4 weights are dequantized to F32
//              (modelopt_nvfp4.h); rope_freqs.weight is added for llama3 rope scaling. Llama's
//              Q/K rows are not permuted: the metadata marks the model NeoX-rotated instead.
//              lm_head.weight is dropped when config.json ties the embeddings; rotary_emb.inv_freq
//              buffers are skipped.
// Errors name the file and tensor: those of HfDirectory::Open and the readers above, UNIMPLEMENTED
// for a tensor outside the name table or of a dtype we do not read, INVALID_ARGUMENT for a
// quantized weight without its scales or untied embeddings without lm_head.weight.
//
// Ownership: the GgufFile keeps the directory's mappings and the copies alive. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"
#include "common/util/mapped_file.h"

namespace tessera::safetensors {

inline constexpr char kSourceFormatKey[] = "tessera.source.format";
inline constexpr char kSourceShardsKey[] = "tessera.source.shards";
inline constexpr char kSourceDtypesKey[] = "tessera.source.dtypes";

// With `with_tensors` false the file has the metadata only (no tensor: nothing is copied or
// dequantized), for readers of the tokenizer and chat template.
absl::StatusOr<std::unique_ptr<gguf::GgufFile>> OpenHfDirectoryAsGguf(
    const std::string& path, util::FileLoad load = util::FileLoad::kMap, bool with_tensors = true);

}  // namespace tessera::safetensors
