// Incremental detokenization for streaming responses: turns ids, one at a time, into text that
// is always valid UTF-8 and never splits a character, even when a character's bytes are spread
// over several byte-level tokens (emoji, CJK).
//
// Push returns the newly completed text: bytes of a character that is still incomplete (a
// well-formed prefix at the end) are held back until later tokens complete it; bytes that can
// never become valid are replaced by U+FFFD right away (one per maximal ill-formed subpart).
// Flush returns what is held back (as U+FFFD) and resets. For token sequences that decode to
// valid UTF-8, the concatenation of all Push outputs and Flush equals Tokenizer::Decode.
//
// Threading: one StreamingDecoder per stream; not thread-safe. The Tokenizer must outlive it.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "common/tokenizer/tokenizer.h"

namespace tessera::tokenizer {

class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, DecodeOptions options = {});

  // INVALID_ARGUMENT (as Tokenizer::Decode) for an id outside the vocabulary; the state is
  // unchanged then.
  absl::StatusOr<std::string> Push(TokenId id);
  std::string Flush();

  size_t num_pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  DecodeOptions options_;
  std::string pending_;  // an incomplete UTF-8 sequence (at most 3 bytes)
};

}  // namespace tessera::tokenizer
