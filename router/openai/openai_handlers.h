// The handlers behind OpenAiServer's routes (see openai_server.h): each takes the parsed HTTP
// request and fills the HTTP response.
//
// Threading: called on cpp-httplib's handler threads, concurrently; the engine is reached only
// through Submit/Cancel and its thread-safe getters.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <random>
#include <string>

#include "router/engine.h"
#include "router/model_frontend.h"
#include "router/openai/openai_request.h"

namespace tessera::router::openai {

class OpenAiHandlers {
 public:
  // `api_key` "" = none; else every handler but Health answers 401 without `Bearer <key>`.
  OpenAiHandlers(Engine* engine, const ModelFrontend* model, std::string api_key);

  void Generate(Endpoint endpoint, const httplib::Request& request, httplib::Response& response);
  void Models(const httplib::Request& request, httplib::Response& response);
  void Health(const httplib::Request& request, httplib::Response& response);
  void Tokenize(const httplib::Request& request, httplib::Response& response);
  void Detokenize(const httplib::Request& request, httplib::Response& response);

 private:
  uint64_t NextSeed();
  // False (and a 401 error object in `response`) without the right API key.
  bool Authorized(const httplib::Request& request, httplib::Response& response) const;
  std::string NextId(Endpoint endpoint);
  absl::StatusOr<std::vector<ValidatedRequest>> Admit(const OpenAiRequest& request,
                                                      const std::string& id);

  Engine* engine_;
  const ModelFrontend* model_;
  const std::string api_key_;
  const int64_t created_;  // the /v1/models "created" time (router start)
  std::mutex seed_mutex_;
  std::mt19937_64 seed_source_;  // seeds and ids for requests that give none
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace tessera::router::openai
