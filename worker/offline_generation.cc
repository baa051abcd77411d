#include "worker/offline_generation.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/util/check.h"

namespace tessera::worker {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The slot this one sequence samples with.
constexpr int kSlot = 0;

absl::Status CheckRequest(const ModelRunner& runner, const GenerationRequest& request) {
  if (request.prompt.empty()) return absl::InvalidArgumentError("prompt is empty");
  const int vocab_size = runner.config().vocab_size;
  for (size_t i = 0; i < request.prompt.size(); ++i) {
    if (request.prompt[i] < 0 || request.prompt[i] >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("prompt[", i, "] = ", request.prompt[i],
                                                     " is outside the vocabulary [0, ",
                                                     vocab_size, ")"));
    }
  }
  if (request.max_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_tokens must be >= 1, got ", request.max_tokens));
  }
  if (request.prefill_chunk < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefill_chunk must be >= 1, got ", request.prefill_chunk));
  }
  const int64_t total = static_cast<int64_t>(request.prompt.size()) + request.max_tokens;
  if (total > runner.config().context_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt (", request.prompt.size(), " tokens) + max_tokens (", request.max_tokens,
        ") exceeds the context length ", runner.config().context_length));
  }
  const KvPoolInfo kv = runner.kv_pool();
  if ((total + kv.block_size - 1) / kv.block_size > kv.num_blocks - 1) {
    return absl::InvalidArgumentError(absl::StrCat("prompt + max_tokens (", total,
                                                   " tokens) does not fit the KV pool (",
                                                   kv.num_blocks - 1, " blocks of ",
                                                   kv.block_size, ")"));
  }
  return sampling::ValidateSamplingParams(request.sampling, vocab_size);
}

// Ends the slot's sampling state on every way out of GenerateOffline.
class SequenceScope {
 public:
  SequenceScope(ModelRunner& runner, const GenerationRequest& request) : runner_(runner) {
    runner_.BeginSequence(kSlot, request.sampling, request.prompt, {});
  }
  ~SequenceScope() { runner_.EndSequence(kSlot); }
  SequenceScope(const SequenceScope&) = delete;
  SequenceScope& operator=(const SequenceScope&) = delete;

 private:
  ModelRunner& runner_;
};

// Runs one step of the sequence; the sampled row (if it needs_logits) is samples->rows[0].
absl::Status StepOne(ModelRunner& runner, const SequenceWork& work, StepSamples* samples) {
  if (absl::Status s = runner.Step({&work, 1}, samples); !s.ok()) return s;
  TESSERA_CHECK(samples->rows.size() == (work.needs_logits ? 1u : 0u),
                "GenerateOffline: the runner sampled the wrong number of rows");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GenerationResult> GenerateOffline(ModelRunner& runner,
                                                 const GenerationRequest& request,
                                                 const std::function<void(int32_t)>& on_token) {
  if (absl::Status status = CheckRequest(runner, request); !status.ok()) return status;
  const KvPoolInfo kv = runner.kv_pool();
  const int64_t total = static_cast<int64_t>(request.prompt.size()) + request.max_tokens;
  std::vector<int32_t> block_table((total + kv.block_size - 1) / kv.block_size);
  std::iota(block_table.begin(), block_table.end(), 1);  // one sequence: blocks 1, 2, ...

  GenerationResult result;
  SequenceScope sequence(runner, request);
  StepSamples samples;
  const auto prefill_start = Clock::now();
  const int32_t prompt_size = static_cast<int32_t>(request.prompt.size());
  for (int32_t pos = 0; pos < prompt_size; pos += request.prefill_chunk) {
    const int32_t n = std::min(request.prefill_chunk, prompt_size - pos);
    const SequenceWork work{.tokens = std::span(request.prompt).subspan(pos, n),
                            .start_pos = pos,
                            .block_table = block_table,
                            .needs_logits = pos + n == prompt_size,
                            .slot = kSlot};
    if (work.needs_logits && request.return_first_logits) {
      // The logits the Step below samples from (it recomputes this chunk: same K/V, same bits).
      StepLogits logits;
      if (absl::Status s = runner.Forward({&work, 1}, &logits); !s.ok()) return s;
      result.first_logits.assign(logits.Row(0).begin(), logits.Row(0).end());
    }
    if (absl::Status s = StepOne(runner, work, &samples); !s.ok()) return s;
  }
  result.prefill_seconds = SecondsSince(prefill_start);

  const auto decode_start = Clock::now();
  for (int i = 0; i < request.max_tokens; ++i) {
    if (i > 0) {
      const SequenceWork work{.tokens = std::span(result.tokens).last(1),
                              .start_pos = prompt_size + i - 1,
                              .block_table = block_table,
                              .needs_logits = true,
                              .slot = kSlot};
      if (absl::Status s = StepOne(runner, work, &samples); !s.ok()) return s;
    }
    const SampleResult& sampled = samples.rows[0];
    result.tokens.push_back(sampled.token);
    result.logprobs.push_back(sampled.logprob);
    if (on_token) on_token(sampled.token);
    if (std::find(request.stop_token_ids.begin(), request.stop_token_ids.end(), sampled.token) !=
        request.stop_token_ids.end()) {
      result.finish_reason = FinishReason::kStop;
      break;
    }
  }
  result.decode_seconds = SecondsSince(decode_start);
  return result;
}

}  // namespace tessera::worker
