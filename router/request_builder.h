// Admission checks of the public API: turns a tessera.v1.GenerateRequest into a validated
// request with its prompt tokens and fully resolved sampling parameters, or INVALID_ARGUMENT with
// a message naming the field (DESIGN.md §8).
//
// Threading: pure functions; called on gRPC handler threads before anything reaches the engine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "router/model_frontend.h"
#include "tessera/v1/tessera.pb.h"
#include "tessera/worker/v1/worker.pb.h"

namespace tessera::router {

// What the router knows about the worker's limits (from Describe).
struct ModelLimits {
  int vocab_size = 0;
  int max_context = 0;
  int max_logprobs = 20;
  bool structured_outputs = false;  // the worker can mask tokens by a grammar
};

// The limits a connected worker reported (DescribeResponse).
ModelLimits LimitsOfWorker(const ::tessera::worker::v1::DescribeResponse& worker);

inline constexpr uint32_t kDefaultMaxTokens = 256;
inline constexpr int kMaxStopStrings = 16;
inline constexpr size_t kMaxStopStringBytes = 256;
// Limits on every field a client can make arbitrarily large (issue 15): request_id is echoed in
// every response and cache_salt keys the prefix cache, so both stay short; a chat's message count
// and the whole request's encoded size bound the work done before the context check. The gRPC
// server's receive limit (kMaxGrpcMessageBytes, main.cc) sits above kMaxRequestBytes so the
// field-naming INVALID_ARGUMENT answers first; above it gRPC itself answers RESOURCE_EXHAUSTED.
inline constexpr size_t kMaxRequestIdBytes = 256;
inline constexpr size_t kMaxCacheSaltBytes = 256;
inline constexpr int kMaxChatMessages = 1024;
inline constexpr size_t kMaxRequestBytes = size_t{1} << 20;
inline constexpr int kMaxGrpcMessageBytes = 4 << 20;

struct ValidatedRequest {
  std::string request_id;
  std::vector<int32_t> prompt_tokens;           // >= 1 token
  int max_tokens = 0;                           // >= 1
  ::tessera::worker::v1::SamplingParams sampling;
  std::vector<std::string> stop;                // non-empty strings
  std::vector<int32_t> stop_token_ids;          // in the vocabulary
  bool ignore_eos = false;
  bool skip_special_tokens = false;
  std::string cache_salt;                       // prefix-cache namespace ("" = shared default)
  // Structured output, parsed (kind NONE: free text). The engine adds the stop tokens when it
  // sends the request to the worker.
  ::tessera::worker::v1::Grammar grammar;
};

// `random_seed` is used when the request gives no seed.
// What an unset max_tokens means: the gRPC API's documented default (kDefaultMaxTokens, shrunk
// to what the context leaves), or all the context leaves (OpenAI chat, as vLLM does).
enum class MaxTokensDefault { kCapped, kRestOfContext };

absl::StatusOr<ValidatedRequest> BuildRequest(
    const ::tessera::v1::GenerateRequest& request, const ModelFrontend& model,
    const ModelLimits& limits, uint64_t random_seed,
    MaxTokensDefault max_tokens_default = MaxTokensDefault::kCapped);

// The prompt of a Tokenize request or a Generate request, as token ids (INVALID_ARGUMENT for an
// empty prompt, ids outside the vocabulary, a chat without a usable template). Plain text parses
// control-token spellings (the caller wrote the whole prompt); chat message content does not:
// only the template's markers become control tokens.
absl::StatusOr<std::vector<int32_t>> TokenizeText(const std::string& text, bool add_special,
                                                  const ModelFrontend& model);
absl::StatusOr<std::vector<int32_t>> TokenizeChat(const ::tessera::v1::Chat& chat,
                                                  const ModelFrontend& model);

}  // namespace tessera::router
