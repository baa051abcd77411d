// ParseExposition: what prometheus-cpp's TextSerializer writes (counters, gauges, labelled
// histograms and summaries, escaped label values, help with escapes, +Inf) parses back to
// families that serialize to the same text; hand-written text (untyped samples, timestamps, NaN,
// -Inf) reads as written; malformed lines are errors naming the line.
#include "common/metrics/exposition_parser.h"

#include <cmath>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "prometheus/summary.h"
#include "prometheus/text_serializer.h"

namespace tessera::metrics {
namespace {

using ::testing::HasSubstr;
using prometheus::MetricType;

std::string Serialize(const std::vector<prometheus::MetricFamily>& families) {
  return prometheus::TextSerializer().Serialize(families);
}

TEST(ExpositionParserTest, WhatTheSerializerWritesRoundTrips) {
  prometheus::Registry registry;
  auto& counter = prometheus::BuildCounter().Name("c_total").Help("a \"quoted\" help \\ text")
                      .Register(registry);
  counter.Add({{"path", "a\"b\\c\nd"}}).Increment(3);
  counter.Add({{"path", "plain"}, {"code", "200"}}).Increment(0.5);
  prometheus::BuildGauge().Name("g").Help("gauge").Register(registry).Add({}).Set(-7.25);
  auto& histogram = prometheus::BuildHistogram().Name("h_seconds").Help("h").Register(registry);
  for (const char* phase : {"prefill", "decode"}) {
    auto& h = histogram.Add({{"phase", phase}}, prometheus::Histogram::BucketBoundaries{0.1, 1, 10});
    h.Observe(0.05);
    h.Observe(5);
  }
  prometheus::BuildSummary().Name("s").Help("s").Register(registry)
      .Add({}, prometheus::Summary::Quantiles{{0.5, 0.05}, {0.9, 0.01}}).Observe(2);
  const std::string text = Serialize(registry.Collect());
  absl::StatusOr<std::vector<prometheus::MetricFamily>> parsed = ParseExposition(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(Serialize(*parsed), text);
  ASSERT_EQ(parsed->size(), 4u);
  const prometheus::MetricFamily* h = nullptr;
  for (const auto& family : *parsed) {
    if (family.name == "h_seconds") h = &family;
  }
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->type, MetricType::Histogram);
  ASSERT_EQ(h->metric.size(), 2u);  // grouped by phase, le taken out
  EXPECT_EQ(h->metric[0].histogram.sample_count, 2u);
  EXPECT_DOUBLE_EQ(h->metric[0].histogram.sample_sum, 5.05);
  ASSERT_EQ(h->metric[0].histogram.bucket.size(), 4u);
  EXPECT_TRUE(std::isinf(h->metric[0].histogram.bucket[3].upper_bound));
  EXPECT_EQ(h->metric[0].histogram.bucket[1].cumulative_count, 1u);
}

TEST(ExpositionParserTest, HandWrittenText) {
  absl::StatusOr<std::vector<prometheus::MetricFamily>> parsed = ParseExposition(
      "loose{a=\"1\",} 4 1700000000000\n"
      "\n"
      "# a comment that is neither HELP nor TYPE\n"
      "# TYPE g gauge\n"
      "g NaN\n"
      "g{x=\"y\"} -Inf\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[0].name, "loose");
  EXPECT_EQ((*parsed)[0].type, MetricType::Untyped);
  EXPECT_EQ((*parsed)[0].metric[0].untyped.value, 4);
  EXPECT_EQ((*parsed)[0].metric[0].timestamp_ms, 1700000000000);
  EXPECT_TRUE(std::isnan((*parsed)[1].metric[0].gauge.value));
  EXPECT_EQ((*parsed)[1].metric[1].gauge.value, -INFINITY);
}

TEST(ExpositionParserTest, MalformedLinesNameTheLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"ok 1\nbad{a=\"1\" 2\n", "exposition line 2"},
      {"x{a=1} 2\n", "exposition line 1"},
      {"x two\n", "exposition line 1"},
      {"x 1 2 3\n", "exposition line 1"},
      {"# TYPE x nonsense\n", "unknown type"},
      {"# TYPE h histogram\nh_bucket 1\n", "has no le label"},
      {"# TYPE h histogram\nh 1\n", "histogram sample without a suffix"},
      {"# TYPE h histogram\nh_bucket{le=\"x\"} 1\n", "not a number"},
      {"# TYPE h histogram\nh_count -1\n", "invalid count"},
      {"# TYPE s summary\ns_bucket{le=\"1\"} 1\n", "bucket of a summary"},
      {"x{a=\"unterminated} 1\n", "exposition line 1"},
  };
  for (const auto& [text, expected] : cases) {
    absl::StatusOr<std::vector<prometheus::MetricFamily>> parsed = ParseExposition(text);
    EXPECT_FALSE(parsed.ok()) << text;
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(expected)) << text;
  }
}

}  // namespace
}  // namespace tessera::metrics
