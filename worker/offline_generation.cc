#include "worker/offline_generation.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/sampler/sampler.h"

namespace tessera::worker {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

absl::Status CheckRequest(const ModelRunner& runner, const GenerationRequest& request) {
  if (request.prompt.empty()) return absl::InvalidArgumentError("prompt is empty");
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
  return ValidateSamplingParams(request.sampling, runner.config().vocab_size);
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
  Sampler sampler(request.sampling, runner.config().vocab_size, request.prompt);
  StepLogits logits;
  const auto prefill_start = Clock::now();
  const int32_t prompt_size = static_cast<int32_t>(request.prompt.size());
  for (int32_t pos = 0; pos < prompt_size; pos += request.prefill_chunk) {
    const int32_t n = std::min(request.prefill_chunk, prompt_size - pos);
    SequenceWork work{.tokens = std::span(request.prompt).subspan(pos, n),
                      .start_pos = pos,
                      .block_table = block_table,
                      .needs_logits = pos + n == prompt_size};
    if (absl::Status s = runner.Forward({&work, 1}, &logits); !s.ok()) return s;
  }
  result.first_logits.assign(logits.Row(0).begin(), logits.Row(0).end());
  result.prefill_seconds = SecondsSince(prefill_start);

  const auto decode_start = Clock::now();
  for (int i = 0; i < request.max_tokens; ++i) {
    if (i > 0) {
      SequenceWork work{.tokens = std::span(result.tokens).last(1),
                        .start_pos = prompt_size + i - 1,
                        .block_table = block_table,
                        .needs_logits = true};
      if (absl::Status s = runner.Forward({&work, 1}, &logits); !s.ok()) return s;
    }
    SampleResult sampled = sampler.Sample(logits.Row(0));
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
