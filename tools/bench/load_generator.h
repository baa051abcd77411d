// `tessera bench`'s load generator: request shapes (seeded, reproducible) and a closed-loop load
// against tessera-router's Generate at a fixed concurrency.
//
// A level runs `concurrency` client threads, each with one streaming request in flight at a time
// (the blocking gRPC API, one thread per stream: fine up to a few hundred), until the level's
// request count or duration is used up. Requests set ignore_eos and max_tokens, so output lengths
// are exact; sampling is greedy unless a temperature is given.
//
// Ownership/threading: a LoadGenerator is used by one thread (RunLevel starts and joins its own
// client threads); ShapeGenerator is not thread-safe (RunLevel locks around it).
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tessera/v1/tessera.grpc.pb.h"
#include "tools/bench/client_auth.h"
#include "tools/bench/load_generator_report.h"

namespace tessera::bench {

struct TokenRange {
  int min = 0;  // inclusive
  int max = 0;  // inclusive
};
// "N" or "MIN:MAX" with 1 <= MIN <= MAX; INVALID_ARGUMENT naming `flag` otherwise.
absl::StatusOr<TokenRange> ParseTokenRange(std::string_view text, std::string_view flag);

struct ShapeOptions {
  TokenRange prompt_tokens{128, 128};
  TokenRange output_tokens{128, 128};
  int shared_prefix_tokens = 0;  // the first N prompt tokens are the same in every request
  // With a shared prefix: this many different ones (e.g. system prompts), each request drawing
  // one uniformly.
  int num_shared_prefixes = 1;
  std::string prompt_text;       // non-empty: every prompt is this text (no random ids)
  int32_t vocab_size = 0;        // random ids are drawn from [0, vocab_size)
  uint64_t seed = 1;
};
// INVALID_ARGUMENT naming the first bad field (ranges >= 1, prefix <= the shortest prompt, a
// prefix only with random ids, vocab_size >= 1 for random ids).
absl::Status ValidateShapeOptions(const ShapeOptions& options);

struct RequestShape {
  std::vector<int32_t> prompt_ids;  // empty when prompt_text is used
  std::string prompt_text;
  int output_tokens = 0;
};

// Draws request shapes: lengths uniform in their ranges, ids uniform in the vocabulary. The same
// options give the same sequence. The shared prefix depends on `seed` only, the rest also on
// `stream` (e.g. the level), so levels draw different prompts (a prefix cache cannot serve one
// level from an earlier one) around the same prefix.
class ShapeGenerator {
 public:
  // Precondition (checked): ValidateShapeOptions(options) is OK.
  ShapeGenerator(ShapeOptions options, uint64_t stream);
  RequestShape Next();

 private:
  ShapeOptions options_;
  std::mt19937_64 rng_;
  std::vector<std::vector<int32_t>> prefixes_;
};

struct LevelOptions {
  int concurrency = 1;           // >= 1
  int64_t num_requests = 0;      // > 0: run this many; else run for duration_s
  double duration_s = 0;         // no new request starts after this
  float temperature = 0.0f;
  std::string json_schema;       // non-empty: every request's output is guided by this schema
  double request_timeout_s = 600;
};

class LoadGenerator {
 public:
  // Connects and reads ModelInfo; UNAVAILABLE ("cannot reach ADDR: ...") when nobody answers.
  // `auth`: the router's API key and TLS CA (client_auth.h), used by every call.
  static absl::StatusOr<std::unique_ptr<LoadGenerator>> Connect(const std::string& addr,
                                                                const ClientAuth& auth = {});

  const v1::ModelInfoResponse& model_info() const { return model_info_; }

  // Runs one level with shapes from `shapes` (shared by the client threads under a lock).
  LevelResult RunLevel(const LevelOptions& options, ShapeGenerator& shapes);

  // Sends requests as OpenAI streaming completions to the router's HTTP API at `http_addr`
  // instead of gRPC Generate (ModelInfo still comes over gRPC).
  void UseOpenAiHttp(std::string http_addr) { http_addr_ = std::move(http_addr); }

  // One request, as RunLevel's threads run it (exposed for warm-up).
  RequestRecord RunRequest(const RequestShape& shape, const LevelOptions& options);

 private:
  LoadGenerator(std::unique_ptr<v1::Tessera::Stub> stub, v1::ModelInfoResponse info,
                ClientAuth auth)
      : stub_(std::move(stub)), model_info_(std::move(info)), auth_(std::move(auth)) {}

  std::unique_ptr<v1::Tessera::Stub> stub_;  // thread-safe; one channel for every stream
  v1::ModelInfoResponse model_info_;
  std::string http_addr_;  // "" = gRPC Generate
  ClientAuth auth_;
};

}  // namespace tessera::bench
