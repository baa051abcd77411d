#include "common/metrics/exposition_parser.h"

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"
#include "common/util/absl_compat.h"

namespace tessera::metrics {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

struct Sample {
  std::string name;
  Labels labels;
  double value = 0;
  int64_t timestamp_ms = 0;
};

ClientMetric MakeSeries(Labels labels) {
  ClientMetric series;
  series.label = std::move(labels);
  return series;
}

bool NameChar(char c, bool first) {
  return absl::ascii_isalpha(c) || c == '_' || c == ':' || (!first && absl::ascii_isdigit(c));
}

std::optional<double> ParseValue(absl::string_view text) {
  if (text == "+Inf" || text == "Inf") return std::numeric_limits<double>::infinity();
  if (text == "-Inf") return -std::numeric_limits<double>::infinity();
  if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
  double value = 0;
  if (!absl::SimpleAtod(text, &value)) return std::nullopt;
  return value;
}

// `"..."` at the front of `*rest` (consumed), with \\, \" and \n unescaped.
std::optional<std::string> QuotedValue(absl::string_view* rest) {
  if (rest->empty() || rest->front() != '"') return std::nullopt;
  std::string out;
  for (size_t i = 1; i < rest->size(); ++i) {
    const char c = (*rest)[i];
    if (c == '"') {
      rest->remove_prefix(i + 1);
      return out;
    }
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (++i == rest->size()) return std::nullopt;
    const char escaped = (*rest)[i];
    out.push_back(escaped == 'n' ? '\n' : escaped);
  }
  return std::nullopt;
}

// `{a="x",b="y"}` at the front of `*rest` (consumed; a trailing comma is allowed).
std::optional<Labels> LabelSet(absl::string_view* rest) {
  Labels labels;
  rest->remove_prefix(1);  // '{'
  while (!rest->empty() && rest->front() != '}') {
    size_t end = 0;
    while (end < rest->size() && NameChar((*rest)[end], end == 0)) ++end;
    if (end == 0 || end == rest->size() || (*rest)[end] != '=') return std::nullopt;
    ClientMetric::Label label{.name = std::string(rest->substr(0, end)), .value = ""};
    rest->remove_prefix(end + 1);
    std::optional<std::string> value = QuotedValue(rest);
    if (!value.has_value()) return std::nullopt;
    label.value = *std::move(value);
    labels.push_back(std::move(label));
    if (!rest->empty() && rest->front() == ',') rest->remove_prefix(1);
  }
  if (rest->empty()) return std::nullopt;
  rest->remove_prefix(1);  // '}'
  return labels;
}

std::optional<Sample> ParseSample(absl::string_view line) {
  Sample sample;
  size_t end = 0;
  while (end < line.size() && NameChar(line[end], end == 0)) ++end;
  if (end == 0) return std::nullopt;
  sample.name = std::string(line.substr(0, end));
  absl::string_view rest = line.substr(end);
  if (!rest.empty() && rest.front() == '{') {
    std::optional<Labels> labels = LabelSet(&rest);
    if (!labels.has_value()) return std::nullopt;
    sample.labels = *std::move(labels);
  }
  const std::vector<absl::string_view> fields =
      absl::StrSplit(rest, ' ', absl::SkipEmpty());
  if (fields.empty() || fields.size() > 2) return std::nullopt;
  std::optional<double> value = ParseValue(fields[0]);
  if (!value.has_value()) return std::nullopt;
  sample.value = *value;
  if (fields.size() == 2 && !absl::SimpleAtoi(fields[1], &sample.timestamp_ms)) {
    return std::nullopt;
  }
  return sample;
}

std::optional<MetricType> TypeNamed(absl::string_view name) {
  if (name == "counter") return MetricType::Counter;
  if (name == "gauge") return MetricType::Gauge;
  if (name == "histogram") return MetricType::Histogram;
  if (name == "summary") return MetricType::Summary;
  if (name == "untyped") return MetricType::Untyped;
  return std::nullopt;
}

// Families in the order they appear; a histogram's or summary's series are grouped by their
// labels (without `le` / `quantile`).
class FamilyBuilder {
 public:
  absl::Status Comment(absl::string_view line);
  absl::Status Add(Sample sample);
  std::vector<MetricFamily> Take() { return std::move(families_); }

 private:
  MetricFamily& Family(const std::string& name);
  ClientMetric& Series(MetricFamily& family, Labels labels);
  absl::Status AddComponent(MetricFamily& family, absl::string_view suffix, Sample sample);

  std::vector<MetricFamily> families_;
  std::map<std::string, size_t> family_index_;
  std::map<std::pair<std::string, Labels>, size_t> series_index_;
};

MetricFamily& FamilyBuilder::Family(const std::string& name) {
  auto [it, added] = family_index_.try_emplace(name, families_.size());
  if (added) {
    families_.push_back(
        MetricFamily{.name = name, .help = "", .type = MetricType::Untyped, .metric = {}});
  }
  return families_[it->second];
}

ClientMetric& FamilyBuilder::Series(MetricFamily& family, Labels labels) {
  auto [it, added] =
      series_index_.try_emplace(std::pair{family.name, labels}, family.metric.size());
  if (added) family.metric.push_back(MakeSeries(std::move(labels)));
  return family.metric[it->second];
}

absl::Status FamilyBuilder::Comment(absl::string_view line) {
  const std::vector<absl::string_view> parts =
      absl::StrSplit(line, absl::MaxSplits(' ', 3));
  if (parts.size() < 3 || (parts[1] != "HELP" && parts[1] != "TYPE")) return absl::OkStatus();
  MetricFamily& family = Family(std::string(parts[2]));
  const absl::string_view rest = parts.size() == 4 ? parts[3] : absl::string_view();
  if (parts[1] == "HELP") {
    family.help = absl::StrReplaceAll(rest, {{"\\n", "\n"}, {"\\\\", "\\"}});
    return absl::OkStatus();
  }
  std::optional<MetricType> type = TypeNamed(rest);
  if (!type.has_value()) return absl::InvalidArgumentError(absl::StrCat("unknown type: ", line));
  family.type = *type;
  return absl::OkStatus();
}

absl::Status FamilyBuilder::Add(Sample sample) {
  for (absl::string_view suffix : {"_bucket", "_sum", "_count"}) {
    if (!absl::EndsWith(sample.name, suffix)) continue;
    auto it = family_index_.find(sample.name.substr(0, sample.name.size() - suffix.size()));
    if (it == family_index_.end()) continue;
    MetricFamily& family = families_[it->second];
    if (family.type == MetricType::Histogram || family.type == MetricType::Summary) {
      return AddComponent(family, suffix, std::move(sample));
    }
  }
  MetricFamily& family = Family(sample.name);
  if (family.type == MetricType::Summary) return AddComponent(family, "", std::move(sample));
  if (family.type == MetricType::Histogram) {
    return absl::InvalidArgumentError(absl::StrCat("histogram sample without a suffix: ", sample.name));
  }
  ClientMetric& series = Series(family, std::move(sample.labels));
  series.timestamp_ms = sample.timestamp_ms;
  series.counter.value = series.gauge.value = series.untyped.value = sample.value;
  return absl::OkStatus();
}

// Removes the label `name` from `labels`; its value, or nullopt when absent.
std::optional<std::string> TakeLabel(Labels& labels, absl::string_view name) {
  for (auto it = labels.begin(); it != labels.end(); ++it) {
    if (it->name != name) continue;
    std::string value = std::move(it->value);
    labels.erase(it);
    return value;
  }
  return std::nullopt;
}

absl::Status FamilyBuilder::AddComponent(MetricFamily& family, absl::string_view suffix,
                                         Sample sample) {
  const bool histogram = family.type == MetricType::Histogram;
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(sample.name, " ", why));
  };
  if (suffix == "_bucket" && !histogram) return bad("is a bucket of a summary");
  std::optional<std::string> bound;
  if (suffix == "_bucket" || (suffix.empty() && !histogram)) {
    bound = TakeLabel(sample.labels, histogram ? "le" : "quantile");
    if (!bound.has_value()) return bad(histogram ? "has no le label" : "has no quantile label");
  }
  ClientMetric& series = Series(family, std::move(sample.labels));
  series.timestamp_ms = sample.timestamp_ms;
  if (suffix == "_sum") {
    (histogram ? series.histogram.sample_sum : series.summary.sample_sum) = sample.value;
    return absl::OkStatus();
  }
  if (suffix == "_count") {
    if (!(sample.value >= 0) || sample.value > 1.8e19) return bad("has an invalid count");
    (histogram ? series.histogram.sample_count : series.summary.sample_count) =
        static_cast<uint64_t>(sample.value);
    return absl::OkStatus();
  }
  std::optional<double> at = ParseValue(*bound);
  if (!at.has_value()) return bad("has a bound that is not a number");
  if (!histogram) {
    series.summary.quantile.push_back({.quantile = *at, .value = sample.value});
    return absl::OkStatus();
  }
  if (!(sample.value >= 0) || sample.value > 1.8e19) return bad("has an invalid count");
  series.histogram.bucket.push_back(
      {.cumulative_count = static_cast<uint64_t>(sample.value), .upper_bound = *at});
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<MetricFamily>> ParseExposition(std::string_view text) {
  FamilyBuilder builder;
  size_t number = 0;
  for (absl::string_view line : absl::StrSplit(util::ToAbsl(text), '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    absl::Status status;
    if (line.front() == '#') {
      status = builder.Comment(line);
    } else if (std::optional<Sample> sample = ParseSample(line); sample.has_value()) {
      status = builder.Add(*std::move(sample));
    } else {
      status = absl::InvalidArgumentError("not a sample");
    }
    if (!status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("exposition line ", number, ": ", status.message()));
    }
  }
  return builder.Take();
}

}  // namespace tessera::metrics
