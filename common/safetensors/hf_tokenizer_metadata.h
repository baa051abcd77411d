// A Hugging Face directory's tokenizer as the GGUF `tokenizer.*` keys, so Tokenizer::FromGguf and
// ChatTemplate::FromGguf read it unchanged (and so does everything built on them):
//   tokenizer.json + tokenizer_config.json  -> the HF loader (common/tokenizer/
//       hf_tokenizer_json_loader.h) -> a BpeSpec -> tokenizer.ggml.{model, pre, tokens,
//       token_type, merges, bos/eos/padding/unknown_token_id, add_bos_token (only when
//       tokenizer_config.json says: else the GGUF pre-tokenizer's default, true for llama3, whose
//       BOS HF adds in its post-processor), add_eos_token}
//   tokenizer_config.json chat_template (a string, or the entry named "default" of a list), else
//       chat_template.jinja -> tokenizer.chat_template
// The token list is padded to config.json's vocab_size with "[PAD<id>]" tokens of type unused,
// as llama.cpp's converter pads it, so every row of the embedding has a token.
//
// GGUF names a pre-tokenizer instead of storing its regexes, so the tokenizer.json's split
// regexes and ignore_merges must be those of a GGUF pre-tokenizer (smollm, gpt2, llama3, dbrx,
// qwen2), as llama.cpp's converter names them: HF's "(?i:'s|'t|...)" contraction group counts as
// llama.cpp's spelled-out "(?:'[sS]|'[tT]|...)", so real Llama 3 and Qwen2/3 tokenizers become
// llama3 and qwen2 and tokenize exactly as their GGUF conversions do. A tokenizer.json without
// such a name, or with model.unk_token (GGUF has no "unknown bytes become unk" flag), is
// UNIMPLEMENTED: the same encoding could not be guaranteed. NOT_FOUND when tokenizer.json is
// missing; the HF loader's errors otherwise, prefixed with the directory. Thread-safe.
#pragma once

#include "absl/status/status.h"
#include "common/safetensors/hf_directory.h"
#include "common/safetensors/metadata_list.h"

namespace tessera::safetensors {

absl::Status AddHfTokenizerMetadata(const HfDirectory& dir, int vocab_size, MetadataList* metadata);

}  // namespace tessera::safetensors
