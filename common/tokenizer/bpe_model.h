// The BPE core of a byte-level tokenizer: vocabulary lookups, merge ranks, and the merge loop that
// turns one pre-tokenized word (raw bytes) into token ids.
//
// Merging: the word's bytes start as their byte-level symbol tokens; repeatedly the adjacent pair
// with the lowest merge rank is merged (leftmost first on ties): for long words with a priority
// queue over a linked list of symbols, O(n log n); for short ones by rescanning a small array.
// Every merge result is a vocab token (checked at load), so the output is always vocab tokens. A
// byte whose symbol is missing from the vocab (real vocabularies lack some: SmolLM2 has no token
// for 0xC0, 0xF5..0xFF, 0x04, ...) is dropped, as llama.cpp and HF tokenizers do, or becomes the
// unknown token when Options::unk_id is set.
//
// Threading: immutable after Create except the word cache, which is synchronized (word_cache.h);
// EncodeWord may run concurrently.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/tokenizer/tokenizer.h"
#include "common/tokenizer/word_cache.h"

namespace tessera::tokenizer {

class BpeModel {
 public:
  struct Options {
    TokenId unk_id = -1;              // stands in for bytes with no vocab symbol; -1: drop them
    bool ignore_merges = false;       // a word that is itself a vocab entry is emitted as is
    size_t cache_capacity = 1 << 16;  // words cached; 0 disables the cache
    // Words up to this many bytes use an allocation-free O(n^2) merge loop (faster for the short
    // words that dominate text); longer ones the priority queue. Both give identical results;
    // tests set 0 to cross-check them.
    size_t max_small_word = 32;
  };

  // `tokens` are byte-level strings (id = index); `merges` are "left right" (rank = index).
  // INVALID_ARGUMENT naming tokenizer.ggml.merges for a malformed merge or one whose halves or
  // result are not tokens; naming tokenizer.ggml.tokens when no byte has a symbol at all (not a
  // byte-level vocabulary).
  static absl::StatusOr<std::unique_ptr<BpeModel>> Create(const std::vector<std::string>& tokens,
                                                          const std::vector<std::string>& merges,
                                                          const Options& options);

  // Appends the ids of `word` (raw bytes, any content).
  void EncodeWord(std::string_view word, std::vector<TokenId>* out) const;

  // Exact vocab lookup by the token's stored (byte-level) text; first id wins for duplicates.
  std::optional<TokenId> FindToken(std::string_view text) const;
  int32_t num_merges() const { return static_cast<int32_t>(merges_.size()); }
  int num_missing_bytes() const { return num_missing_bytes_; }

 private:
  struct MergeEntry {
    int32_t rank;
    TokenId result;
  };
  static constexpr TokenId kMissingByte = -2;          // byte with no vocab symbol: never merges
  static constexpr size_t kMaxSmallWordCapacity = 64;  // upper bound for max_small_word
  void EmitSymbol(TokenId id, std::vector<TokenId>* out) const;

  BpeModel() = default;
  absl::Status IndexTokens(const std::vector<std::string>& tokens);
  absl::Status IndexMerges(const std::vector<std::string>& merges);
  void MergeWord(std::string_view word, std::vector<TokenId>* out) const;
  void MergeSmallWord(std::string_view word, std::vector<TokenId>* out) const;
  const MergeEntry* FindMerge(TokenId left, TokenId right) const;

  Options options_;
  absl::flat_hash_map<std::string, TokenId> token_to_id_;
  absl::flat_hash_map<uint64_t, MergeEntry> merges_;  // key: (left << 32) | right
  std::array<TokenId, 256> byte_tokens_{};
  int num_missing_bytes_ = 0;

  std::unique_ptr<WordCache> cache_;
};

}  // namespace tessera::tokenizer
