#include "tools/bench/load_generator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/util/absl_compat.h"
#include "common/util/check.h"
#include "tools/bench/openai_stream.h"

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string GrpcError(const grpc::Status& status) {
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  return absl::StrCat(absl::StatusCodeToString(code), ": ", status.error_message());
}

v1::GenerateRequest ToRequest(const RequestShape& shape, const LevelOptions& options) {
  v1::GenerateRequest request;
  if (shape.prompt_ids.empty()) {
    request.set_text(shape.prompt_text);
  } else {
    request.mutable_token_ids()->mutable_ids()->Add(shape.prompt_ids.begin(),
                                                     shape.prompt_ids.end());
  }
  request.mutable_sampling()->set_temperature(options.temperature);
  request.set_max_tokens(static_cast<uint32_t>(shape.output_tokens));
  request.set_ignore_eos(true);  // exact output lengths
  if (!options.json_schema.empty()) {
    request.mutable_structured()->set_json_schema(options.json_schema);
  }
  return request;
}

// Folds one streamed response into `record`. `previous` is the time of the last token-bearing
// response (or the send time before the first).
void OnResponse(const v1::GenerateResponse& response, Clock::time_point start,
                Clock::time_point now, Clock::time_point* first, Clock::time_point* previous,
                RequestRecord* record) {
  const int n = response.token_ids_size();
  if (n > 0) {
    if (record->output_tokens == 0) {
      record->ttft_s = Seconds(now - start);
      *first = now;
    } else {
      const double per_token = Seconds(now - *previous) / n;
      record->itl_s.insert(record->itl_s.end(), static_cast<size_t>(n), per_token);
    }
    *previous = now;
    record->output_tokens += n;
  }
  if (response.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
    record->prompt_tokens = response.usage().prompt_tokens();
    record->cached_tokens = response.usage().cached_tokens();
  }
}

}  // namespace

absl::StatusOr<TokenRange> ParseTokenRange(std::string_view text, std::string_view flag) {
  std::vector<absl::string_view> parts = absl::StrSplit(util::ToAbsl(text), ':');
  TokenRange range;
  const bool parsed = (parts.size() == 1 || parts.size() == 2) &&
                      absl::SimpleAtoi(parts.front(), &range.min) &&
                      absl::SimpleAtoi(parts.back(), &range.max);
  if (!parsed || range.min < 1 || range.min > range.max) {
    return absl::InvalidArgumentError(absl::StrCat(util::ToAbsl(flag), ": '", util::ToAbsl(text),
                                                   "' is not N or MIN:MAX with 1 <= MIN <= MAX"));
  }
  return range;
}

absl::Status ValidateShapeOptions(const ShapeOptions& o) {
  if (o.output_tokens.min < 1 || o.output_tokens.min > o.output_tokens.max) {
    return absl::InvalidArgumentError("output tokens: need 1 <= MIN <= MAX");
  }
  if (o.shared_prefix_tokens < 0) {
    return absl::InvalidArgumentError("shared prefix tokens must be >= 0");
  }
  if (o.num_shared_prefixes < 1) {
    return absl::InvalidArgumentError("the number of shared prefixes must be >= 1");
  }
  if (!o.prompt_text.empty()) {
    if (o.shared_prefix_tokens > 0) {
      return absl::InvalidArgumentError("a shared prefix needs random prompts, not a text");
    }
    return absl::OkStatus();
  }
  if (o.prompt_tokens.min < 1 || o.prompt_tokens.min > o.prompt_tokens.max) {
    return absl::InvalidArgumentError("prompt tokens: need 1 <= MIN <= MAX");
  }
  if (o.shared_prefix_tokens > o.prompt_tokens.min) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared prefix tokens = ", o.shared_prefix_tokens,
                     " is longer than the shortest prompt (", o.prompt_tokens.min, ")"));
  }
  if (o.vocab_size < 1) return absl::InvalidArgumentError("vocab size must be >= 1");
  return absl::OkStatus();
}

ShapeGenerator::ShapeGenerator(ShapeOptions options, uint64_t stream)
    : options_(std::move(options)) {
  TESSERA_CHECK(ValidateShapeOptions(options_).ok(), "ShapeGenerator: invalid ShapeOptions");
  std::mt19937_64 prefix_rng(options_.seed);
  if (options_.prompt_text.empty()) {
    std::uniform_int_distribution<int32_t> id(0, options_.vocab_size - 1);
    prefixes_.resize(static_cast<size_t>(options_.num_shared_prefixes));
    for (std::vector<int32_t>& prefix : prefixes_) {
      for (int i = 0; i < options_.shared_prefix_tokens; ++i) prefix.push_back(id(prefix_rng));
    }
  }
  // Distinct streams for distinct (seed, stream) pairs; the prefix has its own.
  std::seed_seq seq{static_cast<uint32_t>(options_.seed), static_cast<uint32_t>(options_.seed >> 32),
                    static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32), 0x7e55e7au};
  rng_.seed(seq);
}

RequestShape ShapeGenerator::Next() {
  RequestShape shape;
  shape.output_tokens = std::uniform_int_distribution<int>(options_.output_tokens.min,
                                                           options_.output_tokens.max)(rng_);
  if (!options_.prompt_text.empty()) {
    shape.prompt_text = options_.prompt_text;
    return shape;
  }
  const int length = std::uniform_int_distribution<int>(options_.prompt_tokens.min,
                                                        options_.prompt_tokens.max)(rng_);
  shape.prompt_ids = prefixes_.size() == 1
                         ? prefixes_.front()
                         : prefixes_[std::uniform_int_distribution<size_t>(
                               0, prefixes_.size() - 1)(rng_)];
  std::uniform_int_distribution<int32_t> id(0, options_.vocab_size - 1);
  while (static_cast<int>(shape.prompt_ids.size()) < length) shape.prompt_ids.push_back(id(rng_));
  return shape;
}

absl::StatusOr<std::unique_ptr<LoadGenerator>> LoadGenerator::Connect(const std::string& addr,
                                                                      const ClientAuth& auth) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentialsFor(auth);
  if (!credentials.ok()) return credentials.status();
  auto stub = v1::Tessera::NewStub(grpc::CreateChannel(addr, *credentials));
  grpc::ClientContext context;
  Authorize(context, auth);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  context.set_wait_for_ready(true);  // ride out a server that is still starting
  v1::ModelInfoResponse info;
  const grpc::Status status = stub->ModelInfo(&context, v1::ModelInfoRequest(), &info);
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot reach ", addr, ": ", GrpcError(status)));
  }
  return std::unique_ptr<LoadGenerator>(new LoadGenerator(std::move(stub), std::move(info), auth));
}

RequestRecord LoadGenerator::RunRequest(const RequestShape& shape, const LevelOptions& options) {
  if (!http_addr_.empty()) {
    return RunOpenAiRequest(http_addr_, model_info_.model_name(), shape, options, auth_);
  }
  const v1::GenerateRequest request = ToRequest(shape, options);
  grpc::ClientContext context;
  Authorize(context, auth_);
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::duration_cast<std::chrono::system_clock::duration>(
                           std::chrono::duration<double>(options.request_timeout_s)));
  RequestRecord record;
  const Clock::time_point start = Clock::now();
  Clock::time_point first = start, previous = start;
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub_->Generate(&context, request);
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    OnResponse(response, start, Clock::now(), &first, &previous, &record);
  }
  const grpc::Status status = reader->Finish();
  record.e2e_s = Seconds(Clock::now() - start);
  record.ok = status.ok();
  if (!status.ok()) record.error = GrpcError(status);
  if (record.output_tokens >= 2 && previous > first) {
    record.decode_tok_s = static_cast<double>(record.output_tokens - 1) / Seconds(previous - first);
  }
  return record;
}

LevelResult LoadGenerator::RunLevel(const LevelOptions& options, ShapeGenerator& shapes) {
  TESSERA_CHECK(options.concurrency >= 1, "RunLevel: concurrency must be >= 1");
  TESSERA_CHECK(options.num_requests > 0 || options.duration_s > 0,
                "RunLevel: give a request count or a duration");
  std::mutex mu;
  std::vector<RequestRecord> records;  // guarded by mu
  std::atomic<int64_t> next{0};
  const Clock::time_point start = Clock::now();
  const Clock::time_point end =
      start + std::chrono::duration_cast<Clock::duration>(
                  std::chrono::duration<double>(std::max(options.duration_s, 0.0)));
  // Claims the next request's shape, or returns false when the level is used up.
  auto claim = [&](RequestShape* shape) {
    if (options.num_requests > 0 ? next.fetch_add(1) >= options.num_requests
                                 : Clock::now() >= end) {
      return false;
    }
    std::lock_guard<std::mutex> lock(mu);
    *shape = shapes.Next();
    return true;
  };
  std::vector<std::thread> clients;
  for (int c = 0; c < options.concurrency; ++c) {
    clients.emplace_back([&] {
      RequestShape shape;
      while (claim(&shape)) {
        RequestRecord record = RunRequest(shape, options);
        std::lock_guard<std::mutex> lock(mu);
        records.push_back(std::move(record));
      }
    });
  }
  for (std::thread& client : clients) client.join();
  return SummarizeLevel(options.concurrency, records, Seconds(Clock::now() - start));
}

}  // namespace tessera::bench
