// Reads the `tokenizer.ggml.*` metadata of a GGUF file into a BpeSpec (Tokenizer::FromGguf is
// ReadBpeSpecFromGguf + BpeTokenizer::Create). Follows llama.cpp's defaults for optional keys:
// no `tokenizer.ggml.pre` means "default", no token_type means all normal, no add_bos_token means
// the pre-tokenizer's default (true only for the llama3 family).
#pragma once

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"
#include "common/tokenizer/bpe_spec.h"

namespace tessera::tokenizer {

// UNIMPLEMENTED naming the model (or pre-tokenizer) when unsupported; INVALID_ARGUMENT naming the
// key for a missing required key (tokens, merges) or a value of the wrong type.
absl::StatusOr<BpeSpec> ReadBpeSpecFromGguf(const gguf::GgufFile& file);

}  // namespace tessera::tokenizer
