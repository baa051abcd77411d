// The handlers behind OpenAiServer's routes (see openai_server.h): each takes the HTTP request and
// answers through its Responder (common/http/responder.h).
//
// Threading: Admit, Models and Health run on the HTTP server's I/O thread and must stay quick;
// the others on its handler threads, concurrently. The engine is reached only through
// Submit/Cancel and its thread-safe getters.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <random>
#include <string>

#include "common/http/http_message.h"
#include "common/http/responder.h"
#include "router/request_engine.h"
#include "router/model_frontend.h"
#include "router/openai/openai_request.h"

namespace tessera::router::openai {

class OpenAiHandlers {
 public:
  // `api_key` "" = none; else every route but /health answers 401 without `Bearer <key>`.
  OpenAiHandlers(RequestEngine* engine, const ModelFrontend* model, std::string api_key);

  // On the request head, before the body is read: a 401 (with WWW-Authenticate) without the
  // right API key, else nothing.
  std::optional<http::Response> Admit(const http::Request& head) const;
  void Completions(const http::Request& request, http::Responder& responder);
  void ChatCompletions(const http::Request& request, http::Responder& responder);
  void Models(const http::Request& request, http::Responder& responder);
  void Health(const http::Request& request, http::Responder& responder);
  void Tokenize(const http::Request& request, http::Responder& responder);
  void Detokenize(const http::Request& request, http::Responder& responder);

 private:
  void Generate(Endpoint endpoint, const http::Request& request, http::Responder& responder);
  uint64_t NextSeed();
  std::string NextId(Endpoint endpoint);
  absl::StatusOr<std::vector<ValidatedRequest>> Admit(const OpenAiRequest& request,
                                                      const std::string& id);

  RequestEngine* engine_;
  const ModelFrontend* model_;
  const std::string api_key_;
  const int64_t created_;  // the /v1/models "created" time (router start)
  std::mutex seed_mutex_;
  std::mt19937_64 seed_source_;  // seeds and ids for requests that give none
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace tessera::router::openai
