// `tessera bench`'s pure parts: percentiles and summaries, level statistics, the table and JSON,
// and seeded request-shape generation. (The gRPC load loop needs a server: e2e.)
#include "tools/bench/load_generator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/bench/load_generator_report.h"

namespace tessera::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(PercentileTest, InterpolatesBetweenClosestRanksLikeNumpy) {
  const std::vector<double> v = {4, 1, 3, 2};  // unsorted on purpose
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 2.5);   // numpy.percentile([1,2,3,4], 50)
  EXPECT_DOUBLE_EQ(Percentile(v, 99), 3.97);  // rank 2.97
  EXPECT_DOUBLE_EQ(Percentile(v, 25), 1.75);
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
  EXPECT_TRUE(std::isnan(Percentile({}, 50)));
}

TEST(PercentileTest, P99OfOneToHundred) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 50.5);
  EXPECT_DOUBLE_EQ(Percentile(v, 99), 99.01);
  EXPECT_DOUBLE_EQ(Percentile(v, 90), 90.1);
}

TEST(SummarizeTest, AllFieldsAndEmpty) {
  const Summary s = Summarize({3, 1, 2});
  EXPECT_EQ(s.count, 3u);
  EXPECT_DOUBLE_EQ(s.mean, 2);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 3);
  EXPECT_DOUBLE_EQ(s.p50, 2);
  EXPECT_DOUBLE_EQ(s.p99, 2.98);
  const Summary empty = Summarize({});
  EXPECT_EQ(empty.count, 0u);
  EXPECT_TRUE(std::isnan(empty.p50));
  EXPECT_TRUE(std::isnan(empty.mean));
}

RequestRecord Ok(double ttft, double e2e, std::vector<double> itl, int64_t tokens) {
  RequestRecord r;
  r.ok = true;
  r.ttft_s = ttft;
  r.e2e_s = e2e;
  r.itl_s = std::move(itl);
  r.output_tokens = tokens;
  r.prompt_tokens = 10;
  r.cached_tokens = 4;
  r.decode_tok_s = tokens > 1 ? (tokens - 1) / (e2e - ttft) : 0;
  return r;
}

TEST(SummarizeLevelTest, SuccessesAndErrorsAreCountedApart) {
  RequestRecord failed;
  failed.error = "UNAVAILABLE: worker gone";
  failed.output_tokens = 2;  // produced before the failure: counts toward throughput only
  const LevelResult level = SummarizeLevel(
      4, {Ok(0.1, 1.1, {0.5, 0.5}, 3), Ok(0.3, 0.7, {0.2, 0.2}, 3), failed, failed}, 2.0);
  EXPECT_EQ(level.concurrency, 4);
  EXPECT_EQ(level.num_requests, 4);
  EXPECT_EQ(level.num_errors, 2);
  EXPECT_EQ(level.errors.at("UNAVAILABLE: worker gone"), 2);
  EXPECT_EQ(level.ttft_s.count, 2u);
  EXPECT_DOUBLE_EQ(level.ttft_s.p50, 0.2);
  EXPECT_EQ(level.itl_s.count, 4u);
  EXPECT_DOUBLE_EQ(level.itl_s.p50, 0.35);
  EXPECT_DOUBLE_EQ(level.e2e_s.max, 1.1);
  EXPECT_EQ(level.output_tokens, 3 + 3 + 2 + 2);
  EXPECT_DOUBLE_EQ(level.output_tok_s, 10 / 2.0);
  EXPECT_EQ(level.prompt_tokens, 20);
  EXPECT_EQ(level.cached_tokens, 8);
  EXPECT_DOUBLE_EQ(level.request_tok_s.p50, (2.0 + 5.0) / 2);  // 2 tok/1 s and 2 tok/0.4 s
}

TEST(ReportTest, TableIsAlignedAndJsonHasEveryNumber) {
  std::vector<LevelResult> levels = {SummarizeLevel(1, {Ok(0.01, 0.5, {0.01}, 2)}, 0.5),
                                     SummarizeLevel(64, {}, 0.0)};
  const std::string table = FormatTable(levels);
  std::vector<std::string> lines;
  for (size_t start = 0, end; (end = table.find('\n', start)) != std::string::npos;
       start = end + 1) {
    lines.push_back(table.substr(start, end - start));
  }
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].size(), lines[1].size());
  EXPECT_EQ(lines[1].size(), lines[2].size());
  EXPECT_THAT(lines[0], HasSubstr("ttft_p50_ms"));
  EXPECT_THAT(lines[1], HasSubstr("10.0"));  // 10 ms TTFT
  EXPECT_THAT(lines[2], HasSubstr(" -"));     // no samples: a dash, not "nan"

  const nlohmann::json doc = nlohmann::json::parse(ToJson(levels, R"({"addr": "x:1"})"));
  EXPECT_EQ(doc["addr"], "x:1");
  ASSERT_EQ(doc["levels"].size(), 2u);
  EXPECT_EQ(doc["levels"][0]["concurrency"], 1);
  EXPECT_DOUBLE_EQ(doc["levels"][0]["ttft_s"]["p50"].get<double>(), 0.01);
  EXPECT_DOUBLE_EQ(doc["levels"][0]["output_tok_s"].get<double>(), 4.0);
  EXPECT_TRUE(doc["levels"][1]["ttft_s"]["p99"].is_null());
}

TEST(TokenRangeTest, ParsesNAndMinMax) {
  EXPECT_EQ(ParseTokenRange("128", "--x")->min, 128);
  EXPECT_EQ(ParseTokenRange("128", "--x")->max, 128);
  const absl::StatusOr<TokenRange> r = ParseTokenRange("16:512", "--x");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->min, 16);
  EXPECT_EQ(r->max, 512);
  for (const char* bad : {"0", "5:4", "a", "1:2:3", "", "-3:4"}) {
    EXPECT_THAT(ParseTokenRange(bad, "--prompt-tokens-range").status().message(),
                HasSubstr("--prompt-tokens-range")) << bad;
  }
}

ShapeOptions RandomShapes() {
  ShapeOptions o;
  o.prompt_tokens = {20, 40};
  o.output_tokens = {5, 9};
  o.shared_prefix_tokens = 16;
  o.vocab_size = 1000;
  o.seed = 42;
  return o;
}

TEST(ShapeGeneratorTest, SeededLengthsInRangeIdsInVocabSharedPrefix) {
  ShapeGenerator a(RandomShapes(), 1), b(RandomShapes(), 1);
  std::set<int> prompt_lengths, output_lengths;
  std::vector<int32_t> prefix;
  for (int i = 0; i < 300; ++i) {
    const RequestShape x = a.Next(), y = b.Next();
    EXPECT_EQ(x.prompt_ids, y.prompt_ids);  // same seed, same stream: same shapes
    EXPECT_EQ(x.output_tokens, y.output_tokens);
    prompt_lengths.insert(static_cast<int>(x.prompt_ids.size()));
    output_lengths.insert(x.output_tokens);
    for (int32_t id : x.prompt_ids) ASSERT_TRUE(id >= 0 && id < 1000) << id;
    const std::vector<int32_t> head(x.prompt_ids.begin(), x.prompt_ids.begin() + 16);
    if (prefix.empty()) prefix = head;
    EXPECT_EQ(head, prefix);
    EXPECT_TRUE(x.prompt_text.empty());
  }
  EXPECT_EQ(*prompt_lengths.begin(), 20);  // both ends of each range are reached
  EXPECT_EQ(*prompt_lengths.rbegin(), 40);
  EXPECT_THAT(output_lengths, ElementsAre(5, 6, 7, 8, 9));
}

TEST(ShapeGeneratorTest, StreamsDifferButShareThePrefix) {
  ShapeGenerator level1(RandomShapes(), 1), level2(RandomShapes(), 2);
  const RequestShape x = level1.Next(), y = level2.Next();
  EXPECT_NE(x.prompt_ids, y.prompt_ids);
  EXPECT_EQ(std::vector<int32_t>(x.prompt_ids.begin(), x.prompt_ids.begin() + 16),
            std::vector<int32_t>(y.prompt_ids.begin(), y.prompt_ids.begin() + 16));
  ShapeOptions other_seed = RandomShapes();
  other_seed.seed = 43;
  EXPECT_NE(ShapeGenerator(other_seed, 1).Next().prompt_ids, x.prompt_ids);
}

// Several shared prefixes: every prompt starts with one of them, and every one is drawn.
TEST(ShapeGeneratorTest, SeveralSharedPrefixesAreEachDrawn) {
  ShapeOptions o = RandomShapes();
  o.num_shared_prefixes = 8;
  ShapeGenerator shapes(o, 1);
  std::set<std::vector<int32_t>> heads;
  for (int i = 0; i < 200; ++i) {
    const RequestShape x = shapes.Next();
    heads.emplace(x.prompt_ids.begin(), x.prompt_ids.begin() + 16);
  }
  EXPECT_EQ(heads.size(), 8u);
  o.num_shared_prefixes = 0;
  EXPECT_THAT(ValidateShapeOptions(o).message(), HasSubstr("number of shared prefixes"));
}

TEST(ShapeGeneratorTest, FixedTextPrompt) {
  ShapeOptions o;
  o.prompt_text = "Tell me a story.";
  o.output_tokens = {3, 3};
  ShapeGenerator shapes(o, 1);
  const RequestShape s = shapes.Next();
  EXPECT_EQ(s.prompt_text, "Tell me a story.");
  EXPECT_TRUE(s.prompt_ids.empty());
  EXPECT_EQ(s.output_tokens, 3);
}

TEST(ShapeGeneratorTest, ValidationNamesTheProblem) {
  ShapeOptions o = RandomShapes();
  EXPECT_TRUE(ValidateShapeOptions(o).ok());
  o.shared_prefix_tokens = 21;
  EXPECT_THAT(ValidateShapeOptions(o).message(), HasSubstr("longer than the shortest prompt"));
  o = RandomShapes();
  o.vocab_size = 0;
  EXPECT_THAT(ValidateShapeOptions(o).message(), HasSubstr("vocab"));
  o = RandomShapes();
  o.prompt_text = "x";
  EXPECT_THAT(ValidateShapeOptions(o).message(), HasSubstr("shared prefix needs random"));
  o = RandomShapes();
  o.output_tokens = {0, 3};
  EXPECT_THAT(ValidateShapeOptions(o).message(), HasSubstr("output tokens"));
}

}  // namespace
}  // namespace tessera::bench
