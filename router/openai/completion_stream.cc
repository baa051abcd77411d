#include "router/openai/completion_stream.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera::router::openai {
namespace {

namespace v1 = ::tessera::v1;

// How long one Provide call waits for tokens before letting cpp-httplib check the socket.
constexpr absl::Duration kPollInterval = absl::Milliseconds(50);

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
                                                 int n) {
  std::vector<ChoiceResult> choices(n);
  while (!job.Finished()) {
    std::optional<JobEvent> event = job.Next(absl::Seconds(1));
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

absl::Status CompletionStream::AwaitStart() {
  while (!first_.has_value()) first_ = job_->Next(absl::Seconds(1));
  if (absl::Status failure = FailureOf(*first_); first_->closed && !failure.ok()) {
    job_->Cancel();
    return failure;
  }
  return absl::OkStatus();
}

bool CompletionStream::Write(httplib::DataSink& sink, const std::string& text) {
  return sink.write(text.data(), text.size());
}

bool CompletionStream::WriteEvent(httplib::DataSink& sink, const JobEvent& event) {
  if (event.closed) {
    usage_[event.choice] = event.response.usage();
    if (absl::Status failure = FailureOf(event); !failure.ok()) {
      return Write(sink, SseEvent(ErrorBody(failure)));
    }
  }
  const bool first = !started_[event.choice];
  started_[event.choice] = true;
  return Write(sink, SseEvent(encoder_->Chunk(event.choice, event.response, first)));
}

bool CompletionStream::Provide(httplib::DataSink& sink) {
  if (done_) return true;
  if (first_.has_value()) {
    JobEvent first = *std::move(first_);
    first_.reset();
    if (!WriteEvent(sink, first)) return false;
  }
  // Everything that has arrived; wait a little only when nothing has.
  for (absl::Duration wait = kPollInterval;; wait = absl::ZeroDuration()) {
    std::optional<JobEvent> event = job_->Next(wait);
    if (!event.has_value()) break;
    if (!WriteEvent(sink, *event)) return false;
  }
  if (!job_->Finished()) return true;
  if (include_usage_ &&
      !Write(sink, SseEvent(encoder_->UsageChunk(ResponseEncoder::Usage(usage_))))) {
    return false;
  }
  if (!Write(sink, kSseDone)) return false;
  done_ = true;
  sink.done();
  return true;
}

void CompletionStream::Release() { job_->Cancel(); }

}  // namespace tessera::router::openai
