// LoadProgress: off a terminal a phase prints a begin line, at most one line per log interval and
// an end line with the rate; on one it rewrites one line in place and ends it with a newline;
// Describe shows percentage, counts, rate and ETA while a phase runs and "" otherwise.
#include "common/util/load_progress.h"

#include <cstdio>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_split.h"

namespace tessera::util {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

std::string Contents(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) out.append(buffer, n);
  return out;
}

TEST(LoadProgressTest, StructuredLinesOffATerminal) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  LoadProgress progress({.prefix = "w", .out = out, .terminal = false,
                         .quiet_period = std::chrono::milliseconds(100),
                         .log_interval = std::chrono::milliseconds(60000)});
  EXPECT_FALSE(progress.active());
  progress.Begin("uploading weights", 1000, LoadProgress::Unit::kParameters);
  for (int i = 0; i < 4; ++i) progress.Advance(100);  // within the quiet period: no line
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  progress.Advance(100);  // past it: the first line
  progress.Advance(100);  // within the log interval: none
  EXPECT_TRUE(progress.active());
  EXPECT_THAT(progress.Describe(),
              MatchesRegex("uploading weights: 60% \\(0\\.0 M parameters of 0\\.0 M parameters, "
                           "[0-9]+ M/s, ETA [0-9]+ s\\)"));
  progress.End();
  EXPECT_FALSE(progress.active());
  EXPECT_EQ(progress.Describe(), "");
  const std::vector<std::string> lines = absl::StrSplit(Contents(out), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << Contents(out);
  EXPECT_THAT(lines[0], MatchesRegex("w: progress phase=\"uploading weights\" done=500 total=1000 "
                                     "percent=50 rate=\"[0-9]+ M/s\" eta_s=[0-9]+"));
  EXPECT_THAT(lines[1], MatchesRegex("w: progress phase=\"uploading weights\" done=1000 "
                                     "seconds=[0-9.]+ rate=\"[0-9]+ M/s\""));
  std::fclose(out);
}

// A phase over within the quiet period prints nothing (a start-up error stays one line).
TEST(LoadProgressTest, AShortPhaseIsSilent) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  LoadProgress progress({.prefix = "w", .out = out, .terminal = false});
  progress.Begin("uploading weights", 10, LoadProgress::Unit::kParameters);
  progress.Advance(10);
  progress.End();
  EXPECT_EQ(Contents(out), "");
  std::fclose(out);
}

TEST(LoadProgressTest, OneRewrittenLineOnATerminal) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  LoadProgress progress({.prefix = "w", .out = out, .terminal = true,
                         .quiet_period = std::chrono::milliseconds(0),
                         .terminal_interval = std::chrono::milliseconds(0)});
  progress.Begin("capturing CUDA graphs", 4, LoadProgress::Unit::kItems);
  progress.Advance(2);
  progress.Begin("reading", 3 << 20, LoadProgress::Unit::kBytes);  // ends the first phase
  progress.Advance(1 << 20);
  progress.End();
  const std::string text = Contents(out);
  EXPECT_THAT(text, HasSubstr("\r\033[Kw: capturing CUDA graphs: 50% (2 of 4"));
  EXPECT_THAT(text, ContainsRegex("\r\033\\[Kw: capturing CUDA graphs: done, 4 in [0-9.]+ s\n"));
  EXPECT_THAT(text, HasSubstr("\r\033[Kw: reading: 33% (1.0 MiB of 3.0 MiB"));
  EXPECT_THAT(text, ContainsRegex("\r\033\\[Kw: reading: done, 3\\.0 MiB in [0-9.]+ s\n$"));
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
  std::fclose(out);
}

TEST(LoadProgressTest, NoOutputStillDescribes) {
  LoadProgress progress({.prefix = "w"});
  progress.Begin("x", 4, LoadProgress::Unit::kItems);
  progress.Advance(10);  // clamped to the total
  EXPECT_THAT(progress.Describe(), HasSubstr("x: 100% (4 of 4"));
}

}  // namespace
}  // namespace tessera::util
