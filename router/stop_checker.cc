#include "router/stop_checker.h"

#include <algorithm>
#include <span>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/tokenizer/utf8.h"
#include "common/util/absl_compat.h"
#include "common/util/check.h"

namespace tessera::router {

absl::Status CheckTokenIds(std::span<const tokenizer::TokenId> ids, std::string_view field,
                           int32_t vocab_size) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(util::ToAbsl(field), "[", i, "] = ", ids[i],
                                                     " is outside the vocabulary [0, ",
                                                     vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status StopChecker::Validate(const StopCheckerOptions& options, int32_t vocab_size) {
  if (options.max_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_tokens = ", options.max_tokens, " must be >= 1"));
  }
  for (size_t i = 0; i < options.stop_strings.size(); ++i) {
    // An empty stop string would match before any text; proto strings are UTF-8 already, but a
    // non-UTF-8 stop string could make us hold back or cut inside a character.
    if (options.stop_strings[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("stop[", i, "] is empty"));
    }
    if (!tokenizer::IsValidUtf8(options.stop_strings[i])) {
      return absl::InvalidArgumentError(absl::StrCat("stop[", i, "] is not valid UTF-8"));
    }
  }
  absl::Status ids = CheckTokenIds(options.stop_token_ids, "stop_token_ids", vocab_size);
  if (!ids.ok()) return ids;
  return CheckTokenIds(options.eos_token_ids, "eos_token_ids", vocab_size);
}

StopChecker::StopChecker(const tokenizer::Tokenizer& tokenizer, StopCheckerOptions options)
    : options_(std::move(options)),
      decoder_(std::make_unique<tokenizer::StreamingDecoder>(
          tokenizer, tokenizer::DecodeOptions{.skip_special = options_.skip_special_tokens})) {
  TESSERA_CHECK(Validate(options_, tokenizer.info().vocab_size).ok(),
                "StopChecker options must pass StopChecker::Validate");
}

absl::StatusOr<StopCheckerOutput> StopChecker::Push(tokenizer::TokenId id) {
  TESSERA_CHECK(!finished(), "StopChecker::Push after the request finished");
  // Ending tokens are not decoded: their text is never emitted.
  if (!options_.ignore_eos && IsEos(id)) {
    ++num_tokens_;
    return Finish(StopReason::kEos, id);
  }
  if (IsStopToken(id)) {
    ++num_tokens_;
    return Finish(StopReason::kStop, id);
  }
  absl::StatusOr<std::string> piece = decoder_->Push(id);
  if (!piece.ok()) return piece.status();
  ++num_tokens_;
  held_ += *piece;

  StopCheckerOutput out;
  if (std::optional<Match> match = FindStop()) {
    out.text = Release(match->begin);
    held_.clear();  // the stop string and whatever followed it in this token
    reason_ = out.reason = StopReason::kStop;
    out.stop_string = options_.stop_strings[match->stop_index];
    return out;
  }
  if (num_tokens_ >= options_.max_tokens) return Finish(StopReason::kLength, std::nullopt);
  out.text = Release(held_.size() - HoldBackLength());
  return out;
}

StopCheckerOutput StopChecker::FinishWithLength() {
  TESSERA_CHECK(!finished(), "StopChecker::FinishWithLength after the request finished");
  return Finish(StopReason::kLength, std::nullopt);
}

bool StopChecker::IsEos(tokenizer::TokenId id) const {
  return std::find(options_.eos_token_ids.begin(), options_.eos_token_ids.end(), id) !=
         options_.eos_token_ids.end();
}

bool StopChecker::IsStopToken(tokenizer::TokenId id) const {
  return std::find(options_.stop_token_ids.begin(), options_.stop_token_ids.end(), id) !=
         options_.stop_token_ids.end();
}

std::optional<StopChecker::Match> StopChecker::FindStop() const {
  // held_ never contains a complete stop string on entry to Push (it would have matched the step
  // before), and no match can start before it (see HoldBackLength), so searching held_ suffices.
  std::optional<Match> best;
  size_t best_end = 0;
  for (size_t i = 0; i < options_.stop_strings.size(); ++i) {
    const std::string& stop = options_.stop_strings[i];
    const size_t begin = held_.find(stop);
    if (begin == std::string::npos) continue;
    const size_t end = begin + stop.size();
    if (!best || end < best_end || (end == best_end && begin < best->begin)) {
      best = Match{.begin = begin, .stop_index = i};
      best_end = end;
    }
  }
  return best;
}

size_t StopChecker::HoldBackLength() const {
  // A match that completes later starts at some p where text[p..] is a proper prefix of a stop
  // string, so keeping the longest such suffix is enough. Stop strings are valid UTF-8, so such a
  // suffix never starts inside a character and the released part stays valid UTF-8.
  const std::string_view held(held_);
  size_t longest = 0;
  for (const std::string& stop : options_.stop_strings) {
    const size_t max_len = std::min(stop.size() - 1, held.size());
    for (size_t len = max_len; len > longest; --len) {
      if (held.substr(held.size() - len) == std::string_view(stop).substr(0, len)) {
        longest = len;
        break;
      }
    }
  }
  return longest;
}

std::string StopChecker::Release(size_t n) {
  std::string out = held_.substr(0, n);
  held_.erase(0, n);
  released_ += out;
  return out;
}

StopCheckerOutput StopChecker::Finish(StopReason reason,
                                      std::optional<tokenizer::TokenId> stop_token_id) {
  held_ += decoder_->Flush();
  StopCheckerOutput out;
  out.text = Release(held_.size());
  out.reason = reason_ = reason;
  out.stop_token_id = stop_token_id;
  return out;
}

}  // namespace tessera::router
