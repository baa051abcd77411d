// `tessera generate --addr HOST:PORT (--prompt TEXT | --chat TEXT | --token-ids 1,2,3)`: a
// streaming client of tessera-router's Generate. Text goes to stdout as responses arrive; the
// finish reason, token counts, time to first token and speed go to stderr at the end.
//
// Sampling flags mean what they mean offline, so the same command line asks the same thing of
// both paths (greedy unless --temperature); the seed is sent only when --seed is given.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/util/absl_compat.h"
#include "tessera/v1/tessera.grpc.pb.h"
#include "tools/cli/commands.h"
#include "tools/cli/grpc_status.h"

namespace tessera::cli {
namespace {

absl::Status SetPrompt(const GenerateOptions& options, v1::GenerateRequest* request) {
  const int num_prompts =
      !options.prompt.empty() + !options.chat.empty() + !options.token_ids.empty();
  if (num_prompts != 1) {
    return absl::InvalidArgumentError("give exactly one of --prompt, --chat or --token-ids");
  }
  if (!options.prompt.empty()) {
    request->set_text(options.prompt);
  } else if (!options.chat.empty()) {
    v1::ChatMessage* message = request->mutable_chat()->add_messages();
    message->set_role("user");
    message->set_content(options.chat);
  } else {
    absl::StatusOr<std::vector<int32_t>> ids = ParseTokenIds(options.token_ids);
    if (!ids.ok()) return ids.status();
    for (int32_t id : *ids) request->mutable_token_ids()->add_ids(id);
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::GenerateRequest> BuildRequest(const GenerateOptions& options) {
  v1::GenerateRequest request;
  absl::Status prompt = SetPrompt(options, &request);
  if (!prompt.ok()) return prompt;
  request.set_request_id(options.request_id);
  v1::SamplingParams* sampling = request.mutable_sampling();
  sampling->set_temperature(options.sampling.temperature);
  sampling->set_top_k(options.sampling.top_k);
  sampling->set_top_p(options.sampling.top_p);
  sampling->set_min_p(options.sampling.min_p);
  sampling->set_repetition_penalty(options.sampling.repetition_penalty);
  sampling->set_presence_penalty(options.sampling.presence_penalty);
  sampling->set_frequency_penalty(options.sampling.frequency_penalty);
  if (options.seed_given) sampling->set_seed(options.sampling.seed);
  if (options.max_tokens < 1) return absl::InvalidArgumentError("--max-tokens must be >= 1");
  request.set_max_tokens(static_cast<uint32_t>(options.max_tokens));
  for (const std::string& stop : options.stop) request.add_stop(stop);
  request.set_ignore_eos(options.ignore_eos);
  if (options.logprobs >= 0) {
    request.set_logprobs(true);
    request.set_top_logprobs(static_cast<uint32_t>(options.logprobs));
  }
  return request;
}

const char* FinishReasonName(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_STOP:
      return "stop";
    case v1::FINISH_REASON_EOS:
      return "eos";
    case v1::FINISH_REASON_CANCELLED:
      return "cancelled";
    case v1::FINISH_REASON_ERROR:
      return "error";
    default:
      return "none";
  }
}

// What the client saw of one stream.
struct StreamStats {
  absl::Time start;
  absl::Time first_token;  // the stream's start until a response carries a token
  absl::Time last_token;
  int num_tokens = 0;
  bool wrote_text = false;
  v1::GenerateResponse last;  // the response with finish_reason, when one came
  std::vector<v1::TokenLogprob> logprobs;
};

std::string FinishDetail(const v1::GenerateResponse& last) {
  std::string detail = FinishReasonName(last.finish_reason());
  if (!last.stop().empty()) {
    absl::StrAppend(&detail, " (stop string \"", absl::CEscape(last.stop()), "\")");
  } else if (last.has_stop_token_id()) {
    absl::StrAppend(&detail, " (token ", last.stop_token_id(), ")");
  }
  return detail;
}

void PrintSummary(const StreamStats& stats) {
  const v1::GenerateResponse& last = stats.last;
  const double ttft = absl::ToDoubleSeconds(stats.first_token - stats.start);
  const double decode_s = absl::ToDoubleSeconds(stats.last_token - stats.first_token);
  std::string line = absl::StrFormat(
      "finish: %s; prompt %d tokens (%d cached), completion %d tokens", FinishDetail(last),
      last.usage().prompt_tokens(), last.usage().cached_tokens(),
      last.usage().completion_tokens());
  if (stats.num_tokens > 0) {
    absl::StrAppendFormat(&line, "; TTFT %.3f s (server %.3f s)", ttft,
                          last.timings().time_to_first_token_seconds());
  }
  if (stats.num_tokens > 1 && decode_s > 0) {
    absl::StrAppendFormat(&line, "; %.1f tok/s", (stats.num_tokens - 1) / decode_s);
  }
  absl::StrAppendFormat(&line, "; total %.3f s\n",
                        absl::ToDoubleSeconds(absl::Now() - stats.start));
  std::fputs(line.c_str(), stderr);
}

// Each id's text as the router detokenizes it alone (special tokens spelled out), quoted; the
// id when the router cannot say.
class TokenTexts {
 public:
  TokenTexts(v1::Tessera::Stub& stub, const bench::ClientAuth& auth) : stub_(stub), auth_(auth) {}

  std::string operator()(int32_t id) {
    auto [at, inserted] = cache_.try_emplace(id);
    if (!inserted) return at->second;
    v1::DetokenizeRequest request;
    request.add_token_ids(id);
    request.set_skip_special_tokens(false);
    v1::DetokenizeResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    bench::Authorize(context, auth_);
    at->second = stub_.Detokenize(&context, request, &response).ok()
                     ? absl::StrCat("'", absl::CEscape(response.text()), "'")
                     : absl::StrCat("#", id);
    return at->second;
  }

 private:
  v1::Tessera::Stub& stub_;
  const bench::ClientAuth& auth_;
  absl::flat_hash_map<int32_t, std::string> cache_;
};

void PrintLogprobs(const std::vector<v1::TokenLogprob>& logprobs, TokenTexts& text) {
  for (size_t i = 0; i < logprobs.size(); ++i) {
    std::string line = absl::StrFormat("logprob %d: token %d %s %.4f", i, logprobs[i].token_id(),
                                       text(logprobs[i].token_id()), logprobs[i].logprob());
    if (logprobs[i].top_logprobs_size() > 0) line += "  top:";
    for (const v1::TopLogprob& top : logprobs[i].top_logprobs()) {
      absl::StrAppendFormat(&line, " %d %s %.4f,", top.token_id(), text(top.token_id()),
                            top.logprob());
    }
    if (line.back() == ',') line.pop_back();
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

void Consume(const v1::GenerateResponse& response, StreamStats* stats) {
  if (!response.text().empty()) {
    std::fwrite(response.text().data(), 1, response.text().size(), stdout);
    std::fflush(stdout);
    stats->wrote_text = true;
  }
  if (response.token_ids_size() > 0) {
    const absl::Time now = absl::Now();
    if (stats->num_tokens == 0) stats->first_token = now;
    stats->last_token = now;
    stats->num_tokens += response.token_ids_size();
  }
  stats->logprobs.insert(stats->logprobs.end(), response.logprobs().begin(),
                         response.logprobs().end());
  if (response.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) stats->last = response;
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> ParseTokenIds(std::string_view text) {
  std::vector<int32_t> ids;
  for (absl::string_view piece : absl::StrSplit(util::ToAbsl(text), ',', absl::SkipEmpty())) {
    int32_t id = 0;
    if (!absl::SimpleAtoi(piece, &id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--token-ids: '", piece, "' is not an integer"));
    }
    ids.push_back(id);
  }
  if (ids.empty()) return absl::InvalidArgumentError("--token-ids: no ids given");
  return ids;
}

absl::Status RunGenerateClient(const GenerateOptions& options) {
  absl::StatusOr<v1::GenerateRequest> request = BuildRequest(options);
  if (!request.ok()) return request.status();
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      bench::ChannelCredentialsFor(options.auth);
  if (!credentials.ok()) return credentials.status();
  std::unique_ptr<v1::Tessera::Stub> stub =
      v1::Tessera::NewStub(grpc::CreateChannel(options.addr, *credentials));

  grpc::ClientContext context;
  bench::Authorize(context, options.auth);
  StreamStats stats;
  stats.start = absl::Now();
  stats.first_token = stats.last_token = stats.start;
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub->Generate(&context, *request);
  v1::GenerateResponse response;
  while (reader->Read(&response)) Consume(response, &stats);
  const grpc::Status status = reader->Finish();
  if (!status.ok()) {
    if (stats.wrote_text) std::fputs("\n", stdout);  // the error line starts on its own line
    std::fflush(stdout);
    return FromGrpcStatus(status);
  }
  if (stats.wrote_text) std::fputs("\n", stdout);  // the answer ends its line
  std::fflush(stdout);
  PrintSummary(stats);
  TokenTexts texts(*stub, options.auth);
  PrintLogprobs(stats.logprobs, texts);
  return absl::OkStatus();
}

}  // namespace tessera::cli
