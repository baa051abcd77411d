#include "common/sampling/sampling_params.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace tessera::sampling {
namespace {

absl::Status Invalid(const char* field, const char* range, double value) {
  return absl::InvalidArgumentError(absl::StrCat(field, " must be ", range, ", got ", value));
}

}  // namespace

absl::Status ValidateSamplingParams(const SamplingParams& p, int vocab_size) {
  if (vocab_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("vocab_size must be > 0, got ", vocab_size));
  }
  // Comparisons are written so that NaN fails them.
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature)) {
    return Invalid("temperature", "a finite number >= 0 (0 = greedy)", p.temperature);
  }
  if (p.top_k < 0) return Invalid("top_k", ">= 0 (0 disables it)", p.top_k);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return Invalid("top_p", "in (0, 1]", p.top_p);
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return Invalid("min_p", "in [0, 1]", p.min_p);
  if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty)) {
    return Invalid("repetition_penalty", "a finite number > 0 (1 disables it)",
                   p.repetition_penalty);
  }
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f)) {
    return Invalid("presence_penalty", "in [-2, 2]", p.presence_penalty);
  }
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f)) {
    return Invalid("frequency_penalty", "in [-2, 2]", p.frequency_penalty);
  }
  const std::vector<int32_t>& tokens = p.logit_bias_tokens;
  if (p.logit_bias_values.size() != tokens.size()) {
    return absl::InvalidArgumentError("logit_bias has a different number of tokens and biases");
  }
  if (tokens.size() > static_cast<size_t>(kMaxLogitBiasTokens)) {
    return absl::InvalidArgumentError(absl::StrCat("logit_bias has ", tokens.size(),
                                                   " entries; at most ", kMaxLogitBiasTokens));
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab_size || (i > 0 && tokens[i] <= tokens[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "logit_bias[", i, "].token_id = ", tokens[i], " must be in [0, ", vocab_size,
          ") and above the previous one (ascending, distinct)"));
    }
    const float bias = p.logit_bias_values[i];
    if (!(bias >= -kMaxLogitBias && bias <= kMaxLogitBias)) {
      return Invalid("logit_bias", "biases in [-100, 100]", bias);
    }
  }
  const int max_logprobs = std::min(kMaxLogprobs, vocab_size);
  if (p.num_logprobs < 0 || p.num_logprobs > max_logprobs) {
    return absl::InvalidArgumentError(absl::StrCat("num_logprobs must be in [0, ", max_logprobs,
                                                   "], got ", p.num_logprobs));
  }
  return absl::OkStatus();
}

}  // namespace tessera::sampling
