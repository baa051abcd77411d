// Reads a HF tokenizer.json (model.type "BPE", byte-level) into a BpeSpec
// (Tokenizer::FromHfJson is ReadBpeSpecFromHfJson + BpeTokenizer::Create).
//
// Supported shapes (anything else is UNIMPLEMENTED, naming what was found):
//   normalizer: null
//   pre_tokenizer: ByteLevel(add_prefix_space = false), optionally preceded (in a Sequence) by
//     Digits and/or Split(pattern, behavior = "Isolated", invert = false) stages; ByteLevel last.
//   model: BPE with vocab {token: id}, merges as "a b" strings or ["a", "b"] pairs, no
//     byte_fallback / continuing_subword_prefix / end_of_word_suffix / dropout.
//   decoder: ByteLevel
//   added_tokens: {id, content, special}; special -> kControl, otherwise kUserDefined;
//     lstrip/rstrip/single_word are not supported.
// BOS/EOS/PAD/UNK ids and add_bos/add_eos come from a tokenizer_config.json next to the file
// when there is one (tokenizer.json alone does not say). model.unk_token sets unk_id and, as in
// HF, makes bytes without a vocab symbol encode to it (otherwise they are dropped).
// The post_processor is ignored (add_bos/add_eos from tokenizer_config.json stand for it).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/tokenizer/bpe_spec.h"

namespace tessera::tokenizer {

// `tokenizer_config_json` may be empty (no config). INVALID_ARGUMENT for malformed JSON or
// inconsistent content, UNIMPLEMENTED for unsupported components.
absl::StatusOr<BpeSpec> ParseHfTokenizerJson(std::string_view tokenizer_json,
                                             std::string_view tokenizer_config_json);
// Reads `path` and, when present, tokenizer_config.json in the same directory.
// NOT_FOUND when `path` cannot be read.
absl::StatusOr<BpeSpec> ReadBpeSpecFromHfJson(const std::string& path);

}  // namespace tessera::tokenizer
