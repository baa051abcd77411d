#include "router/openai/completion_stream.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera::router::openai {
namespace {

namespace v1 = ::tessera::v1;

// How long a handler waits for tokens before it looks whether its client is still there: the
// bound on the time to cancel an abandoned request.
constexpr absl::Duration kPollInterval = absl::Milliseconds(50);

absl::Status ClientLeft() {
  return absl::CancelledError("the client closed the connection");
}

// A choice that ended without a finish reason (cancelled, failed) as a status to report.
absl::Status FailureOf(const JobEvent& event) {
  if (!event.status.ok()) return event.status;
  if (event.response.finish_reason() == v1::FINISH_REASON_ERROR ||
      event.response.finish_reason() == v1::FINISH_REASON_CANCELLED) {
    return absl::InternalError(event.response.error_message().empty()
                                   ? "the request ended without a result"
                                   : event.response.error_message());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<nlohmann::json> CollectCompletion(CompletionJob& job, ResponseEncoder& encoder,
                                                 int n, const http::Responder& client) {
  std::vector<ChoiceResult> choices(n);
  while (!job.Finished()) {
    if (client.ClientGone()) {
      job.Cancel();
      return ClientLeft();
    }
    std::optional<JobEvent> event = job.Next(kPollInterval);
    if (!event.has_value()) continue;
    if (absl::Status failure = FailureOf(*event); event->closed && !failure.ok()) {
      job.Cancel();
      return failure;
    }
    ChoiceResult& choice = choices[event->choice];
    choice.text += event->response.text();
    choice.logprobs.insert(choice.logprobs.end(), event->response.logprobs().begin(),
                           event->response.logprobs().end());
    if (event->closed) {
      choice.finish_reason = event->response.finish_reason();
      choice.usage = event->response.usage();
    }
  }
  return encoder.Complete(choices);
}

CompletionStream::CompletionStream(std::shared_ptr<CompletionJob> job,
                                   std::unique_ptr<ResponseEncoder> encoder, int n,
                                   bool include_usage)
    : job_(std::move(job)),
      encoder_(std::move(encoder)),
      include_usage_(include_usage),
      started_(n, false),
      usage_(n) {}

absl::Status CompletionStream::AwaitStart(const http::Responder& client) {
  while (!first_.has_value()) {
    if (client.ClientGone()) {
      job_->Cancel();
      return ClientLeft();
    }
    first_ = job_->Next(kPollInterval);
  }
  if (absl::Status failure = FailureOf(*first_); first_->closed && !failure.ok()) {
    job_->Cancel();
    return failure;
  }
  return absl::OkStatus();
}

bool CompletionStream::WriteEvent(http::Responder& client, const JobEvent& event) {
  if (event.closed) {
    usage_[event.choice] = event.response.usage();
    if (absl::Status failure = FailureOf(event); !failure.ok()) {
      return client.Write(SseEvent(ErrorBody(failure)));
    }
  }
  const bool first = !started_[event.choice];
  started_[event.choice] = true;
  return client.Write(SseEvent(encoder_->Chunk(event.choice, event.response, first)));
}

void CompletionStream::Run(http::Responder& client) {
  bool open = client.Begin(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
  if (open && first_.has_value()) {
    JobEvent first = *std::move(first_);
    first_.reset();
    open = WriteEvent(client, first);
  }
  while (open && !job_->Finished()) {
    std::optional<JobEvent> event = job_->Next(kPollInterval);
    open = event.has_value() ? WriteEvent(client, *event) : !client.ClientGone();
  }
  if (open && include_usage_) {
    open = client.Write(SseEvent(encoder_->UsageChunk(ResponseEncoder::Usage(usage_))));
  }
  if (open) open = client.Write(kSseDone);
  if (!open) return job_->Cancel();  // the client left: free the request's KV blocks
  client.End();
}

}  // namespace tessera::router::openai
