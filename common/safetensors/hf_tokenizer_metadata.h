// A Hugging Face directory's tokenizer as the GGUF `tokenizer.*` keys, so Tokenizer::FromGguf and
// ChatTemplate::FromGguf read it unchanged (and so does everything built on them):
//   tokenizer.json + tokenizer_config.json  -> the HF loader (common/tokenizer/
//       hf_tokenizer_json_loader.h) -> a BpeSpec -> tokenizer.ggml.{model, pre, tokens,
//       token_type, merges, bos/eos/padding/unknown_token_id, add_bos_token, add_eos_token}
//   tokenizer_config.json chat_template (a string, or the entry named "default" of a list), else
//       chat_template.jinja -> tokenizer.chat_template
// The token list is padded to config.json's vocab_size with "[PAD<id>]" tokens of type unused,
// as llama.cpp's converter pads it, so every row of the embedding has a token.
//
// GGUF names a pre-tokenizer instead of storing its regexes, so the tokenizer.json must be one
// that the HF loader names (smollm, gpt2, llama3, qwen2), with that name's ignore_merges, and
// without model.unk_token (GGUF has no "unknown bytes become unk" flag): otherwise UNIMPLEMENTED,
// as the same encoding could not be guaranteed. NOT_FOUND when tokenizer.json is missing; the
// HF loader's errors otherwise, prefixed with the file. Thread-safe.
#pragma once

#include "absl/status/status.h"
#include "common/safetensors/hf_directory.h"
#include "common/safetensors/metadata_list.h"

namespace tessera::safetensors {

absl::Status AddHfTokenizerMetadata(const HfDirectory& dir, int vocab_size, MetadataList* metadata);

}  // namespace tessera::safetensors
