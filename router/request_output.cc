#include "router/request_output.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/util/check.h"

namespace tessera::router {
namespace {

namespace v1 = ::tessera::v1;
namespace wv1 = ::tessera::worker::v1;

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

StopCheckerOptions StopOptions(const ValidatedRequest& request,
                               const std::vector<int32_t>& eos_token_ids) {
  return StopCheckerOptions{.stop_strings = request.stop,
                            .stop_token_ids = request.stop_token_ids,
                            .eos_token_ids = eos_token_ids,
                            .ignore_eos = request.ignore_eos,
                            .skip_special_tokens = request.skip_special_tokens,
                            .max_tokens = request.max_tokens};
}

v1::FinishReason ToFinishReason(StopReason reason) {
  switch (reason) {
    case StopReason::kLength: return v1::FINISH_REASON_LENGTH;
    case StopReason::kStop: return v1::FINISH_REASON_STOP;
    case StopReason::kEos: return v1::FINISH_REASON_EOS;
    case StopReason::kNone: break;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

RequestOutcome ToOutcome(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_STOP: return RequestOutcome::kStop;
    case v1::FINISH_REASON_EOS: return RequestOutcome::kEos;
    case v1::FINISH_REASON_LENGTH: return RequestOutcome::kLength;
    case v1::FINISH_REASON_CANCELLED: return RequestOutcome::kCancelled;
    default: return RequestOutcome::kError;
  }
}

}  // namespace

RequestOutput::RequestOutput(ValidatedRequest request, std::shared_ptr<ResponseSink> sink,
                             Clock::time_point arrival, const tokenizer::Tokenizer& tokenizer,
                             const std::vector<int32_t>& eos_token_ids, RouterMetrics* metrics)
    : request_(std::move(request)),
      sink_(std::move(sink)),
      stop_checker_(tokenizer, StopOptions(request_, eos_token_ids)),
      arrival_(arrival),
      metrics_(metrics) {
  TESSERA_CHECK(metrics_ != nullptr, "RequestOutput needs RouterMetrics");
}

void RequestOutput::OnScheduled(Clock::time_point now, int32_t cached_tokens) {
  if (first_scheduled_.has_value()) return;
  first_scheduled_ = now;
  cached_tokens_ = cached_tokens;
  metrics_->ObserveAdmitted(Seconds(now - arrival_),
                            static_cast<int64_t>(request_.prompt_tokens.size()));
}

void RequestOutput::ObserveToken(Clock::time_point now) {
  const bool first = !first_token_.has_value();
  if (first) first_token_ = now;
  metrics_->ObserveToken(first, Seconds(now - (first ? arrival_ : last_token_)));
  last_token_ = now;
}

bool RequestOutput::Accept(const wv1::SampledToken& sampled, Clock::time_point now) {
  absl::StatusOr<StopCheckerOutput> output = stop_checker_.Push(sampled.token_id());
  if (!output.ok()) {
    Close(v1::FINISH_REASON_ERROR,
          absl::InternalError(absl::StrCat("the worker sampled a bad token: ",
                                           output.status().message())));
    return true;
  }
  ObserveToken(now);
  v1::GenerateResponse response;
  response.set_request_id(request_.request_id);
  response.set_text(std::move(output->text));
  response.add_token_ids(sampled.token_id());
  AddLogprobs(sampled, &response);
  if (!output->finished()) {
    sink_->Send(std::move(response));
    return false;
  }
  FillFinal(*output, now, &response);
  metrics_->ObserveFinished(ToOutcome(response.finish_reason()), Seconds(now - arrival_));
  sink_->Close(std::move(response), absl::OkStatus());
  return true;
}

void RequestOutput::AddLogprobs(const wv1::SampledToken& sampled,
                                v1::GenerateResponse* response) const {
  if (!request_.sampling.logprobs()) return;
  v1::TokenLogprob* logprob = response->add_logprobs();
  logprob->set_token_id(sampled.token_id());
  logprob->set_logprob(sampled.logprob());
  for (const wv1::TopLogprob& top : sampled.top_logprobs()) {
    v1::TopLogprob* out = logprob->add_top_logprobs();
    out->set_token_id(top.token_id());
    out->set_logprob(top.logprob());
  }
}

void RequestOutput::FillFinal(const StopCheckerOutput& output, Clock::time_point now,
                              v1::GenerateResponse* response) const {
  response->set_finish_reason(ToFinishReason(output.reason));
  response->set_stop(output.stop_string);
  if (output.stop_token_id.has_value()) response->set_stop_token_id(*output.stop_token_id);
  v1::Usage* usage = response->mutable_usage();
  usage->set_prompt_tokens(request_.prompt_tokens.size());
  usage->set_completion_tokens(stop_checker_.num_tokens());
  usage->set_cached_tokens(cached_tokens_);
  v1::Timings* timings = response->mutable_timings();
  timings->set_queue_seconds(Seconds(first_scheduled_.value_or(now) - arrival_));
  timings->set_time_to_first_token_seconds(Seconds(first_token_.value_or(now) - arrival_));
  timings->set_total_seconds(Seconds(now - arrival_));
}

void RequestOutput::Close(v1::FinishReason reason, const absl::Status& status) {
  v1::GenerateResponse last;
  last.set_request_id(request_.request_id);
  last.set_finish_reason(reason);
  if (reason == v1::FINISH_REASON_ERROR) last.set_error_message(std::string(status.message()));
  const Clock::time_point now = Clock::now();
  last.mutable_usage()->set_prompt_tokens(request_.prompt_tokens.size());
  last.mutable_usage()->set_completion_tokens(stop_checker_.num_tokens());
  last.mutable_usage()->set_cached_tokens(cached_tokens_);
  last.mutable_timings()->set_total_seconds(Seconds(now - arrival_));
  metrics_->ObserveFinished(ToOutcome(reason), Seconds(now - arrival_));
  sink_->Close(std::move(last), status);
}

}  // namespace tessera::router
