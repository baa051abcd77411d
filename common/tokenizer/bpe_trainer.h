// A small byte-level BPE trainer, for generating tiny test models whose tokenizer behaves like a
// real one (merges, specials, byte fallback) without shipping a real vocabulary.
//
// The corpus is split on the special tokens, pre-tokenized with the "smollm" regexes (so words at
// encode time are cut the same way as at training time), and merges are learned greedily: each
// step merges the most frequent adjacent pair (ties: the lexicographically smallest pair of token
// strings, so results are deterministic). Training stops early when no pair occurs twice.
//
// Pure function of its inputs; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tokenizer/bpe_spec.h"

namespace tessera::tokenizer {

// Returns a spec with: ids [0, k) the special tokens in the given order (type kControl), then the
// 256 byte symbols in byte order (kNormal), then one token per merge in merge order (kNormal;
// a merge whose result string already exists reuses that token). model = "gpt2",
// pre_tokenizer = "smollm", bos_id = 0 and eos_id = pad_id = 1 (both 0 when k == 1; -1 when
// k == 0), unk_id = -1, add_bos = add_eos = false.
// INVALID_ARGUMENT for num_merges < 0 or an empty or duplicate special token.
absl::StatusOr<BpeSpec> TrainByteLevelBpe(std::string_view corpus, int num_merges,
                                          std::vector<std::string> special_tokens);

}  // namespace tessera::tokenizer
