// Statistics and reports of `tessera bench`: what one streamed request measured, the summary of a
// concurrency level, the aligned table and the JSON document.
//
// Definitions (each a choice, stated once here):
// - TTFT: request sent -> first response that carries a token (client clock).
// - Inter-token latency: for each token-bearing response after the first, the gap since the
//   previous one divided by its number of tokens, counted once per token (a response with 4
//   tokens after 40 ms adds four 10 ms samples), so responses that batch tokens weigh by tokens.
// - Per-request tok/s: a request's decode speed, (tokens - 1) / (last token - first token); only
//   requests with >= 2 tokens spread over time contribute.
// - Aggregate output tok/s: all output tokens of the level / the level's wall time (first send to
//   last finish).
// - Percentiles interpolate linearly between closest ranks (numpy's default).
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tessera::bench {

// The p-th percentile (p in [0, 100]) of `values`; NaN when empty.
double Percentile(std::vector<double> values, double p);

struct Summary {
  size_t count = 0;
  double mean = 0, min = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;  // NaN when count == 0
};
Summary Summarize(std::vector<double> values);

// One request as the client saw it.
struct RequestRecord {
  bool ok = false;
  std::string error;              // "CODE: message" when !ok
  double ttft_s = 0;              // valid when output_tokens > 0
  double e2e_s = 0;               // sent -> stream finished
  double decode_tok_s = 0;        // 0 when it cannot be measured (< 2 tokens)
  std::vector<double> itl_s;      // one sample per token after the first response's
  int64_t output_tokens = 0;      // token ids received
  int64_t prompt_tokens = 0;      // from the final usage
  int64_t cached_tokens = 0;
};

struct LevelResult {
  int concurrency = 0;
  int64_t num_requests = 0;
  int64_t num_errors = 0;
  double wall_s = 0;
  Summary ttft_s, itl_s, e2e_s, request_tok_s;  // over successful requests
  double output_tok_s = 0;                      // aggregate
  int64_t output_tokens = 0, prompt_tokens = 0, cached_tokens = 0;
  std::map<std::string, int64_t> errors;        // message -> count (distinct messages, capped)
};

LevelResult SummarizeLevel(int concurrency, const std::vector<RequestRecord>& records,
                           double wall_s);

// The per-level table, one row per level, columns aligned, times in ms (e2e in s).
std::string FormatTable(const std::vector<LevelResult>& levels);

// A JSON object {"levels": [...]} with every number of every level, merged into `header`
// (a JSON object text, e.g. the model and the options; "{}" for none).
std::string ToJson(const std::vector<LevelResult>& levels, const std::string& header);

}  // namespace tessera::bench
