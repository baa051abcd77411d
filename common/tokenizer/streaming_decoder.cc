#include "common/tokenizer/streaming_decoder.h"

#include <span>
#include <utility>

#include "common/tokenizer/utf8.h"

namespace tessera::tokenizer {

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, DecodeOptions options)
    : tokenizer_(tokenizer), options_(options) {}

absl::StatusOr<std::string> StreamingDecoder::Push(TokenId id) {
  absl::StatusOr<std::string> bytes = tokenizer_.Decode(std::span<const TokenId>(&id, 1), options_);
  if (!bytes.ok()) return bytes.status();
  pending_ += *bytes;
  const size_t complete = CompleteUtf8Prefix(pending_);
  std::string out = SanitizeUtf8(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string StreamingDecoder::Flush() {
  std::string out = SanitizeUtf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace tessera::tokenizer
