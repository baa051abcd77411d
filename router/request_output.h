// One request's output side on the router: incremental detokenization and stop checks
// (StopChecker), the responses streamed to the client, and the request's timings and usage.
//
// It also reports the request's lifecycle to RouterMetrics (queue time, time to first token,
// inter-token latency, generated tokens, outcome and end-to-end latency) as it happens.
//
// Ownership/threading: owned by the engine (one per live request), used only on the engine thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "router/request_builder.h"
#include "router/response_sink.h"
#include "router/router_metrics.h"
#include "router/stop_checker.h"
#include "tessera/v1/tessera.pb.h"
#include "tessera/worker/v1/worker.pb.h"

namespace tessera::router {

class RequestOutput {
 public:
  using Clock = std::chrono::steady_clock;

  // Precondition: metrics != nullptr and outlives the request.
  RequestOutput(ValidatedRequest request, std::shared_ptr<ResponseSink> sink,
                Clock::time_point arrival, const tokenizer::Tokenizer& tokenizer,
                const std::vector<int32_t>& eos_token_ids, RouterMetrics* metrics);

  const ValidatedRequest& request() const { return request_; }
  ResponseSink& sink() const { return *sink_; }
  Clock::time_point arrival() const { return arrival_; }
  // Whether a plan has carried it yet (its queue time is over).
  bool ever_scheduled() const { return first_scheduled_.has_value(); }

  // The request was given a slot; the first call fixes the queue time and the cached tokens.
  void OnScheduled(Clock::time_point now, int32_t cached_tokens);

  // Takes the next sampled token and streams what it releases. True when the request finished:
  // its last response went out and the sink is closed.
  bool Accept(const ::tessera::worker::v1::SampledToken& sampled, Clock::time_point now);

  // Ends the request early (cancelled, error): a last response with `reason` and the message,
  // then the stream's status.
  void Close(::tessera::v1::FinishReason reason, const absl::Status& status);

  int32_t num_generated() const { return stop_checker_.num_tokens(); }

 private:
  void AddLogprobs(const ::tessera::worker::v1::SampledToken& sampled,
                   ::tessera::v1::GenerateResponse* response) const;
  void FillFinal(const StopCheckerOutput& output, Clock::time_point now,
                 ::tessera::v1::GenerateResponse* response) const;
  void ObserveToken(Clock::time_point now);

  ValidatedRequest request_;
  std::shared_ptr<ResponseSink> sink_;
  StopChecker stop_checker_;
  Clock::time_point arrival_;
  std::optional<Clock::time_point> first_scheduled_;
  std::optional<Clock::time_point> first_token_;
  Clock::time_point last_token_;  // meaningful once first_token_ is set
  RouterMetrics* metrics_;
  int32_t cached_tokens_ = 0;
};

}  // namespace tessera::router
