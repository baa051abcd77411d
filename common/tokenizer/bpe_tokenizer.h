// BpeTokenizer: the Tokenizer implementation for byte-level BPE, built from a BpeSpec (which the
// GGUF loader, the HF tokenizer.json loader and the trainer all produce).
//
// Encode = special-token matching (special_tokens.h) -> pre-tokenizer regexes (pre_tokenizer.h)
// -> BPE merges per piece (bpe_model.h). Decode concatenates each token's raw bytes exactly, so
// Decode(Encode(text)) == text for any bytes, including invalid UTF-8, as long as every byte has
// a symbol in the vocab (bytes without one are dropped, as in llama.cpp and HF; see bpe_model.h);
// use StreamingDecoder for output that must be valid UTF-8.
//
// Threading: immutable after Create; every method may run concurrently.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tokenizer/bpe_model.h"
#include "common/tokenizer/bpe_spec.h"
#include "common/tokenizer/pre_tokenizer.h"
#include "common/tokenizer/special_tokens.h"
#include "common/tokenizer/tokenizer.h"

namespace tessera::tokenizer {

class BpeTokenizer final : public Tokenizer {
 public:
  struct Options {
    // Distinct short words whose BPE result is memoized (see BpeModel); 0 disables the cache.
    size_t word_cache_capacity = BpeModel::Options{}.cache_capacity;
    // Longest word merged by the short-word loop (BpeModel::Options::max_small_word).
    size_t max_small_word = BpeModel::Options{}.max_small_word;
  };

  // Validates the spec. UNIMPLEMENTED naming the model / pre-tokenizer when unsupported;
  // INVALID_ARGUMENT naming the GGUF key for inconsistent data (array lengths, ids out of range,
  // bad merges, byte symbols missing without an unknown token).
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> Create(BpeSpec spec, const Options& options);
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> Create(BpeSpec spec) {
    return Create(std::move(spec), Options{});
  }

  const TokenizerInfo& info() const override { return info_; }
  std::vector<TokenId> Encode(std::string_view text, const EncodeOptions& options) const override;
  std::vector<TokenId> EncodeSegments(std::span<const TextSegment> segments,
                                      const EncodeOptions& options) const override;
  absl::StatusOr<std::string> Decode(std::span<const TokenId> ids,
                                     const DecodeOptions& options) const override;
  std::string TokenBytes(TokenId id) const override;
  std::string_view TokenText(TokenId id) const override;
  TokenType GetTokenType(TokenId id) const override;
  std::optional<TokenId> FindToken(std::string_view text) const override;

  const BpeSpec& spec() const { return spec_; }
  // Bytes (of 256) with no symbol in the vocab; they are dropped (or become unk) when encoded.
  int num_missing_bytes() const { return model_->num_missing_bytes(); }

 private:
  BpeTokenizer() = default;
  absl::Status Init(BpeSpec spec, const Options& options);
  void CheckId(TokenId id) const;  // aborts with a message on a precondition violation
  // Encodes text that holds no special tokens: pre-tokenize, then BPE each piece.
  void EncodeOrdinary(std::string_view text, std::vector<TokenId>* ids) const;

  BpeSpec spec_;
  TokenizerInfo info_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  SpecialTokenMatcher special_tokens_;
  std::vector<std::string> token_bytes_;  // raw bytes per id, precomputed for Decode
};

// Checks what Create checks, without building anything.
absl::Status ValidateBpeSpec(const BpeSpec& spec);

}  // namespace tessera::tokenizer
