// Per-request incremental detokenization and stop handling: turns sampled token ids, one at a
// time, into the text a client may see now, and decides when (and why) the request ends.
//
// Rules (vLLM / TGI behaviour):
// - Stop strings may span several tokens. Only the text suffix that could still grow into a stop
//   string (the longest suffix that is a proper prefix of some stop string) is held back;
//   everything before it is released at once.
// - When stop strings match, the first one to *complete* wins (ties: the one that starts first),
//   i.e. the result is what a character-by-character scan would find, independent of how the
//   tokenizer split the text. The text before the match is released; the match and everything
//   after it are discarded.
// - An EOS id (unless ignore_eos) and a stop token id end the request without emitting the
//   token's text. With ignore_eos an EOS id is an ordinary token.
// - With skip_special_tokens, control tokens' text is dropped (their ids still count).
// - Precedence when one token satisfies several conditions (TGI's order): EOS, stop token id,
//   stop string, then LENGTH (max_tokens reached).
// - Whenever the request finishes, the held-back text (and any incomplete UTF-8 tail, as U+FFFD)
//   is released, except what a matched stop string discards.
// - Released text is always valid UTF-8 and never splits a character (StreamingDecoder).
//
// Token ids reported to the client: every accepted token, including the one that ended the
// request (EOS, stop token id, or the token that completed a stop string), as vLLM does; so
// num_tokens() is completion_tokens. Tokens the worker sampled after the finish (one step may be
// in flight) are never pushed: the caller discards them.
//
// Invariant the tests pin: the concatenation of all released text equals
// Tokenizer::Decode(tokens) truncated at the start of the first stop-string match.
//
// Ownership/threading: one StopChecker per request, owned by whoever owns the request (the
// router's engine thread); not thread-safe. The Tokenizer must outlive it. Pure logic: no I/O.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tokenizer/streaming_decoder.h"
#include "common/tokenizer/tokenizer.h"

namespace tessera::router {

struct StopCheckerOptions {
  std::vector<std::string> stop_strings;             // each non-empty, valid UTF-8
  std::vector<tokenizer::TokenId> stop_token_ids;    // each in [0, vocab_size)
  std::vector<tokenizer::TokenId> eos_token_ids;     // the model's EOS ids (may be empty)
  bool ignore_eos = false;
  bool skip_special_tokens = false;
  int32_t max_tokens = 256;                          // >= 1
};

// Why the request ended; kNone while it goes on. Maps 1:1 onto tessera.v1.FinishReason
// (LENGTH, STOP, EOS).
enum class StopReason { kNone, kLength, kStop, kEos };

// INVALID_ARGUMENT "field[i] = id is outside the vocabulary [0, vocab_size)" for the first id out
// of range.
absl::Status CheckTokenIds(std::span<const tokenizer::TokenId> ids, std::string_view field,
                           int32_t vocab_size);


struct StopCheckerOutput {
  std::string text;                                  // releasable now; valid UTF-8, maybe empty
  StopReason reason = StopReason::kNone;
  std::string stop_string;                           // kStop by a stop string: the one matched
  std::optional<tokenizer::TokenId> stop_token_id;   // kStop by a stop token id, or kEos

  bool finished() const { return reason != StopReason::kNone; }
};

class StopChecker {
 public:
  // OK, or INVALID_ARGUMENT naming the offending field (e.g. "stop[1] is empty",
  // "stop_token_ids[0] = 70000 is outside the vocabulary [0, 49152)", "max_tokens = 0 ...").
  static absl::Status Validate(const StopCheckerOptions& options, int32_t vocab_size);

  // Precondition (checked): Validate(options, tokenizer.info().vocab_size) is OK.
  StopChecker(const tokenizer::Tokenizer& tokenizer, StopCheckerOptions options);

  StopChecker(StopChecker&&) = default;
  StopChecker& operator=(StopChecker&&) = default;

  // Accepts one sampled token. Precondition (checked): !finished(). INVALID_ARGUMENT for an id
  // outside the vocabulary (a broken worker); the state is unchanged then.
  absl::StatusOr<StopCheckerOutput> Push(tokenizer::TokenId id);

  // Ends the request now with LENGTH (e.g. the context window is full before max_tokens),
  // releasing the held-back text. Precondition (checked): !finished().
  StopCheckerOutput FinishWithLength();

  bool finished() const { return reason_ != StopReason::kNone; }
  StopReason reason() const { return reason_; }
  // Accepted tokens, including the one that ended the request.
  int32_t num_tokens() const { return num_tokens_; }
  // Everything released so far; the request's final text once finished().
  const std::string& text() const { return released_; }
  // Bytes held back because they may start a stop string (tests, debugging).
  size_t num_held_bytes() const { return held_.size(); }

 private:
  struct Match {
    size_t begin = 0;
    size_t stop_index = 0;
  };

  bool IsEos(tokenizer::TokenId id) const;
  bool IsStopToken(tokenizer::TokenId id) const;
  // The first stop string to complete within held_, if any.
  std::optional<Match> FindStop() const;
  // Length of the longest suffix of held_ that is a proper prefix of some stop string.
  size_t HoldBackLength() const;
  // Moves held_[0, n) to the released text and returns it.
  std::string Release(size_t n);
  // Finishes with `reason`, releasing the held-back text and the decoder's incomplete tail.
  StopCheckerOutput Finish(StopReason reason, std::optional<tokenizer::TokenId> stop_token_id);

  StopCheckerOptions options_;
  // Behind a pointer so the checker stays move-assignable (the decoder holds a reference).
  std::unique_ptr<tokenizer::StreamingDecoder> decoder_;
  std::string held_;      // decoded but not yet released: may still start a stop string
  std::string released_;  // concatenation of every released text
  int32_t num_tokens_ = 0;
  StopReason reason_ = StopReason::kNone;
};

}  // namespace tessera::router
