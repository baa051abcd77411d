// `tessera bench --addr HOST:PORT`: a concurrency sweep against a running server. Per level a
// progress line goes to stderr; at the end the table goes to stdout and, with --json, every
// number to a file. Failed requests make the command fail after reporting (a benchmark with
// errors is not a result). Definitions of the numbers: tools/bench/load_generator_report.h.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tools/bench/load_generator.h"
#include "tools/cli/commands.h"

namespace tessera::cli {
namespace {

absl::StatusOr<std::vector<int>> ParseConcurrency(const std::string& text) {
  std::vector<int> levels;
  for (absl::string_view piece : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int level = 0;
    if (!absl::SimpleAtoi(piece, &level) || level < 1 || level > 4096) {
      return absl::InvalidArgumentError(
          absl::StrCat("--concurrency: '", piece, "' is not an integer in [1, 4096]"));
    }
    levels.push_back(level);
  }
  if (levels.empty()) return absl::InvalidArgumentError("--concurrency: no levels given");
  return levels;
}

absl::StatusOr<bench::ShapeOptions> ToShapeOptions(const BenchOptions& options) {
  bench::ShapeOptions shape;
  shape.prompt_text = options.prompt_text;
  shape.shared_prefix_tokens = options.shared_prefix_tokens;
  shape.num_shared_prefixes = options.shared_prefixes;
  shape.seed = options.seed;
  absl::StatusOr<bench::TokenRange> prompt = bench::ParseTokenRange(
      options.prompt_tokens_range.empty() ? absl::StrCat(options.prompt_tokens)
                                          : options.prompt_tokens_range,
      options.prompt_tokens_range.empty() ? "--prompt-tokens" : "--prompt-tokens-range");
  if (!prompt.ok()) return prompt.status();
  absl::StatusOr<bench::TokenRange> output = bench::ParseTokenRange(
      options.output_tokens_range.empty() ? absl::StrCat(options.output_tokens)
                                          : options.output_tokens_range,
      options.output_tokens_range.empty() ? "--output-tokens" : "--output-tokens-range");
  if (!output.ok()) return output.status();
  shape.prompt_tokens = *prompt;
  shape.output_tokens = *output;
  return shape;
}

// The JSON header: what was measured, against what.
std::string Header(const BenchOptions& options, const bench::ShapeOptions& shape,
                   const v1::ModelInfoResponse& info) {
  nlohmann::json header = {
      {"addr", options.addr},
      {"model", {{"name", info.model_name()}, {"architecture", info.architecture()},
                 {"backend", info.backend()}, {"device", info.device()},
                 {"vocab_size", info.vocab_size()}, {"max_num_seqs", info.max_num_seqs()}}},
      {"config", {{"prompt_tokens_min", shape.prompt_tokens.min},
                  {"prompt_tokens_max", shape.prompt_tokens.max},
                  {"prompt_text", shape.prompt_text},
                  {"output_tokens_min", shape.output_tokens.min},
                  {"output_tokens_max", shape.output_tokens.max},
                  {"shared_prefix_tokens", shape.shared_prefix_tokens},
                  {"shared_prefixes", shape.num_shared_prefixes},
                  {"seed", shape.seed},
                  {"temperature", options.temperature},
                  {"num_requests", options.num_requests},
                  {"duration_s", options.duration_s}}}};
  return header.dump();
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

void PrintProgress(const bench::LevelResult& level) {
  std::fprintf(stderr,
               "%s\n",
               absl::StrFormat("concurrency %d: %d requests (%d errors) in %.2f s, %.1f output "
                               "tok/s",
                               level.concurrency, level.num_requests, level.num_errors,
                               level.wall_s, level.output_tok_s)
                   .c_str());
  for (const auto& [message, count] : level.errors) {
    std::fprintf(stderr, "  %lld x %s\n", static_cast<long long>(count), message.c_str());
  }
}

bench::LevelOptions LevelFor(const BenchOptions& options, int concurrency) {
  bench::LevelOptions level;
  level.concurrency = concurrency;
  level.duration_s = options.duration_s;
  level.num_requests = options.duration_s > 0
                           ? 0
                           : (options.num_requests > 0 ? options.num_requests
                                                       : std::max(8, 4 * concurrency));
  level.temperature = options.temperature;
  level.json_schema = options.json_schema;
  return level;
}

}  // namespace

absl::Status RunBench(const BenchOptions& options) {
  absl::StatusOr<std::vector<int>> levels = ParseConcurrency(options.concurrency);
  if (!levels.ok()) return levels.status();
  absl::StatusOr<bench::ShapeOptions> shape = ToShapeOptions(options);
  if (!shape.ok()) return shape.status();
  absl::StatusOr<std::unique_ptr<bench::LoadGenerator>> generator =
      bench::LoadGenerator::Connect(options.addr, options.auth);
  if (!generator.ok()) return generator.status();
  if (options.api == "openai") {
    if (options.http_addr.empty()) {
      return absl::InvalidArgumentError("--api openai needs --http-addr HOST:PORT");
    }
    (*generator)->UseOpenAiHttp(options.http_addr);
  }
  shape->vocab_size = (*generator)->model_info().vocab_size();
  if (absl::Status valid = bench::ValidateShapeOptions(*shape); !valid.ok()) return valid;

  // One short request first: connection set-up and first-step costs stay out of level 1.
  bench::ShapeOptions warmup_shape = *shape;
  warmup_shape.output_tokens = {2, 2};
  (*generator)->RunRequest(bench::ShapeGenerator(warmup_shape, /*stream=*/0).Next(),
                           LevelFor(options, 1));

  std::vector<bench::LevelResult> results;
  int64_t num_errors = 0;
  std::string first_error;
  for (int concurrency : *levels) {
    bench::ShapeGenerator shapes(*shape, /*stream=*/static_cast<uint64_t>(results.size()) + 1);
    results.push_back((*generator)->RunLevel(LevelFor(options, concurrency), shapes));
    PrintProgress(results.back());
    num_errors += results.back().num_errors;
    if (first_error.empty() && !results.back().errors.empty()) {
      first_error = results.back().errors.begin()->first;
    }
  }
  std::fputs(bench::FormatTable(results).c_str(), stdout);
  std::fflush(stdout);
  if (!options.json_path.empty()) {
    const std::string json =
        bench::ToJson(results, Header(options, *shape, (*generator)->model_info()));
    if (absl::Status written = WriteFile(options.json_path, json); !written.ok()) return written;
  }
  if (num_errors > 0) {
    return absl::UnavailableError(
        absl::StrCat(num_errors, " requests failed (e.g. ", first_error, ")"));
  }
  return absl::OkStatus();
}

}  // namespace tessera::cli
