// A GGUF model's tokenizer (tokenizer.ggml.*, tokenizer.chat_template) as the Hugging Face files
// the HF loader (common/tokenizer/hf_tokenizer_json_loader.h) reads back to the same BpeSpec:
//   tokenizer.json         model BPE (vocab of the normal tokens, merges, ignore_merges of the
//                          pre-tokenizer), added_tokens (control -> special, user-defined ->
//                          not special), pre_tokenizer Sequence[Split(regex, Isolated) for each
//                          regex the GGUF pre-tokenizer names, ByteLevel(use_regex false)],
//                          decoder ByteLevel
//   tokenizer_config.json  bos/eos/pad/unk tokens by text, add_bos_token, add_eos_token,
//                          chat_template
// UNIMPLEMENTED for token types tokenizer.json cannot carry this way (byte, unused, unknown).
// Pure functions; thread-safe.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "common/gguf/gguf_file.h"

namespace tessera::convert {

// Writes both files into `dir` (which must exist).
absl::Status WriteHfTokenizerFiles(const gguf::GgufFile& file, const std::string& dir);

}  // namespace tessera::convert
