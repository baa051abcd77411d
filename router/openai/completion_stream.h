// Turns a CompletionJob's events into the HTTP answer: the whole response object (non-streaming)
// or server-sent events written through the request's Responder (streaming).
//
// Streaming: the HTTP status is chosen before the first byte, so the handler first waits for the
// job's first event — an error before any token (queue full, no worker, draining) still gets its
// own status and error object. After that, each event becomes one `data: {chunk}` event; an error
// mid-stream becomes `data: {"error": ...}` before `data: [DONE]`. When the client goes away (the
// HTTP server sees the socket close, a write fails or stalls), streaming or not, the job is
// cancelled within kPollInterval, which frees the request's KV blocks in the engine.
//
// Threading: everything here runs on the HTTP handler thread that owns the job.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/http/responder.h"
#include "router/completion_job.h"
#include "router/openai/openai_response.h"

namespace tessera::router::openai {

// Waits for every choice to finish; the response object, or the first choice's error. A client
// that leaves meanwhile cancels the job (CANCELLED).
absl::StatusOr<nlohmann::json> CollectCompletion(CompletionJob& job, ResponseEncoder& encoder,
                                                 int n, const http::Responder& client);

class CompletionStream {
 public:
  CompletionStream(std::shared_ptr<CompletionJob> job, std::unique_ptr<ResponseEncoder> encoder,
                   int n, bool include_usage);

  // Waits for the first event; an error when it closes its choice with an error (nothing sent),
  // or CANCELLED when the client left first.
  absl::Status AwaitStart(const http::Responder& client);
  // Streams every event as it arrives, then the usage chunk (when asked) and [DONE]. Cancels the
  // job when the client leaves.
  void Run(http::Responder& client);

 private:
  bool WriteEvent(http::Responder& client, const JobEvent& event);

  std::shared_ptr<CompletionJob> job_;
  std::unique_ptr<ResponseEncoder> encoder_;
  bool include_usage_;
  std::optional<JobEvent> first_;  // taken by AwaitStart, sent first by Run
  std::vector<bool> started_;      // per choice: its first chunk went out
  std::vector<::tessera::v1::Usage> usage_;
};

}  // namespace tessera::router::openai
