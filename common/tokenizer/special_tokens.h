// Finds added/special tokens in raw text before pre-tokenization, so `<|im_start|>` becomes one id
// instead of being split into `<`, `|`, `im`, ...
//
// Matching is leftmost-longest (HF tokenizers' AddedVocabulary semantics): scanning left to right,
// the first position where any token starts wins, and among tokens starting there the longest.
// Control tokens are only matched when asked (EncodeOptions::parse_special); user-defined tokens
// always are, as both llama.cpp and HF do for non-special added tokens.
//
// Threading: immutable after construction; Find may run concurrently.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/tokenizer/tokenizer.h"

namespace tessera::tokenizer {

class SpecialTokenMatcher {
 public:
  struct Match {
    size_t begin = 0;
    size_t length = 0;
    TokenId id = -1;
  };

  // Precondition: !text.empty(). A text added twice keeps its first id.
  void Add(std::string_view text, TokenId id, bool is_control);

  // The leftmost-longest match in text[pos, end), or nullopt.
  std::optional<Match> FindNext(std::string_view text, size_t pos, bool include_control) const;

  size_t size() const { return num_tokens_; }

 private:
  struct Node {
    absl::flat_hash_map<uint8_t, int32_t> children;
    TokenId id = -1;
    bool is_control = false;
  };
  // Longest match starting exactly at `pos`.
  std::optional<Match> LongestAt(std::string_view text, size_t pos, bool include_control) const;

  std::vector<Node> nodes_{Node{}};     // nodes_[0] is the root
  std::array<bool, 256> first_byte_{};  // fast reject for positions no token starts at
  size_t num_tokens_ = 0;
};

}  // namespace tessera::tokenizer
