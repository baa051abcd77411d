// Turns a CompletionJob's events into the HTTP answer: the whole response object (non-streaming)
// or server-sent events written through cpp-httplib's chunked content provider (streaming).
//
// Streaming: the HTTP status is chosen before the first byte, so the handler first waits for the
// job's first event — an error before any token (queue full, no worker, draining) still gets its
// own status and error object. After that, each event becomes one `data: {chunk}` event; an error
// mid-stream becomes `data: {"error": ...}` before `data: [DONE]`. When the client goes away (a
// write fails, or cpp-httplib finds the socket closed while we wait for tokens) the job is
// cancelled, which frees the request's KV blocks in the engine.
//
// Threading: everything here runs on the HTTP handler thread that owns the job.
#pragma once

#include <httplib.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "router/completion_job.h"
#include "router/openai/openai_response.h"

namespace tessera::router::openai {

// Waits for every choice to finish; the response object, or the first choice's error.
absl::StatusOr<nlohmann::json> CollectCompletion(CompletionJob& job, ResponseEncoder& encoder,
                                                 int n);

class CompletionStream {
 public:
  CompletionStream(std::shared_ptr<CompletionJob> job, std::unique_ptr<ResponseEncoder> encoder,
                   int n, bool include_usage);

  // Waits for the first event; an error when it closes its choice with an error (nothing sent).
  absl::Status AwaitStart();
  // cpp-httplib's content provider: writes what has arrived (waiting a little for more); false
  // when the client is gone.
  bool Provide(httplib::DataSink& sink);
  // cpp-httplib's releaser: cancels what is still running (the client went away early).
  void Release();

 private:
  bool Write(httplib::DataSink& sink, const std::string& text);
  bool WriteEvent(httplib::DataSink& sink, const JobEvent& event);

  std::shared_ptr<CompletionJob> job_;
  std::unique_ptr<ResponseEncoder> encoder_;
  bool include_usage_;
  std::optional<JobEvent> first_;  // taken by AwaitStart, sent by the first Provide
  std::vector<bool> started_;      // per choice: its first chunk went out
  std::vector<::tessera::v1::Usage> usage_;
  bool done_ = false;
};

}  // namespace tessera::router::openai
