#include "tools/bench/load_generator_report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace tessera::bench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Distinct error messages kept per level (a dead server makes every request fail alike).
constexpr size_t kMaxDistinctErrors = 8;

std::string Ms(double seconds) {
  return std::isnan(seconds) ? "-" : absl::StrFormat("%.1f", seconds * 1e3);
}

std::string Fixed(double value, int digits) {
  return std::isnan(value) ? "-" : absl::StrFormat("%.*f", digits, value);
}

nlohmann::json SummaryJson(const Summary& s) {
  // nlohmann writes NaN as null, which is what "no samples" should read as.
  return {{"count", s.count}, {"mean", s.mean}, {"min", s.min}, {"p50", s.p50},
          {"p90", s.p90},     {"p99", s.p99},   {"max", s.max}};
}

}  // namespace

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return kNaN;
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, values.size() - 1);
  const double fraction = rank - static_cast<double>(below);
  return values[below] + (values[above] - values[below]) * fraction;
}

Summary Summarize(std::vector<double> values) {
  Summary s;
  s.count = values.size();
  if (values.empty()) {
    s.mean = s.min = s.p50 = s.p90 = s.p99 = s.max = kNaN;
    return s;
  }
  std::sort(values.begin(), values.end());
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(s.count);
  s.min = values.front();
  s.max = values.back();
  s.p50 = Percentile(values, 50);
  s.p90 = Percentile(values, 90);
  s.p99 = Percentile(values, 99);
  return s;
}

LevelResult SummarizeLevel(int concurrency, const std::vector<RequestRecord>& records,
                           double wall_s) {
  LevelResult level;
  level.concurrency = concurrency;
  level.num_requests = static_cast<int64_t>(records.size());
  level.wall_s = wall_s;
  std::vector<double> ttft, itl, e2e, tok_s;
  for (const RequestRecord& r : records) {
    level.output_tokens += r.output_tokens;  // failed requests' tokens were still produced
    if (!r.ok) {
      ++level.num_errors;
      if (level.errors.size() < kMaxDistinctErrors || level.errors.count(r.error)) {
        ++level.errors[r.error];
      }
      continue;
    }
    level.prompt_tokens += r.prompt_tokens;
    level.cached_tokens += r.cached_tokens;
    if (r.output_tokens > 0) ttft.push_back(r.ttft_s);
    e2e.push_back(r.e2e_s);
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
    if (r.decode_tok_s > 0) tok_s.push_back(r.decode_tok_s);
  }
  level.ttft_s = Summarize(std::move(ttft));
  level.itl_s = Summarize(std::move(itl));
  level.e2e_s = Summarize(std::move(e2e));
  level.request_tok_s = Summarize(std::move(tok_s));
  level.output_tok_s = wall_s > 0 ? static_cast<double>(level.output_tokens) / wall_s : kNaN;
  return level;
}

std::string FormatTable(const std::vector<LevelResult>& levels) {
  std::vector<std::vector<std::string>> rows = {
      {"concurrency", "requests", "errors", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms",
       "itl_p99_ms", "e2e_p50_s", "output_tok/s", "req_tok/s_p50"}};
  for (const LevelResult& l : levels) {
    rows.push_back({absl::StrCat(l.concurrency), absl::StrCat(l.num_requests),
                    absl::StrCat(l.num_errors), Ms(l.ttft_s.p50), Ms(l.ttft_s.p99),
                    Ms(l.itl_s.p50), Ms(l.itl_s.p99), Fixed(l.e2e_s.p50, 3),
                    Fixed(l.output_tok_s, 1), Fixed(l.request_tok_s.p50, 1)});
  }
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::string table;
  for (const auto& row : rows) {
    std::vector<std::string> cells;
    for (size_t c = 0; c < row.size(); ++c) {
      cells.push_back(absl::StrFormat("%*s", static_cast<int>(widths[c]), row[c]));
    }
    absl::StrAppend(&table, absl::StrJoin(cells, "  "), "\n");
  }
  return table;
}

std::string ToJson(const std::vector<LevelResult>& levels, const std::string& header) {
  nlohmann::json doc = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) doc = nlohmann::json::object();
  nlohmann::json out = nlohmann::json::array();
  for (const LevelResult& l : levels) {
    out.push_back({{"concurrency", l.concurrency},
                   {"requests", l.num_requests},
                   {"errors", l.num_errors},
                   {"wall_s", l.wall_s},
                   {"ttft_s", SummaryJson(l.ttft_s)},
                   {"itl_s", SummaryJson(l.itl_s)},
                   {"e2e_s", SummaryJson(l.e2e_s)},
                   {"request_decode_tok_s", SummaryJson(l.request_tok_s)},
                   {"output_tok_s", l.output_tok_s},
                   {"output_tokens", l.output_tokens},
                   {"prompt_tokens", l.prompt_tokens},
                   {"cached_tokens", l.cached_tokens},
                   {"error_messages", l.errors}});
  }
  doc["levels"] = std::move(out);
  return doc.dump(2) + "\n";
}

}  // namespace tessera::bench
