// StepRecorder: every line is valid JSON with exactly the documented keys; results join the
// right step with two plans in flight; unanswered steps (Close, a new stream, a lost result) are
// written with null result fields; the file survives without Close (lines flushed as written).
#include "router/step_recorder.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tessera::router {
namespace {

namespace wv1 = ::tessera::worker::v1;
using ::testing::ElementsAre;
using Clock = StepRecorder::Clock;
using Json = nlohmann::ordered_json;
using std::chrono::milliseconds;

constexpr const char* kResultKeys[] = {"host_s", "device_s", "sample_s",
                                       "total_s", "graph_replayed", "round_trip_s"};

class StepTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = (std::filesystem::temp_directory_path() /
             (std::string("step_trace_") + info->name() + "_" + std::to_string(::getpid()) +
              ".jsonl"))
                .string();
    auto writer = StepRecorder::Open(path_, start_);
    ASSERT_TRUE(writer.ok()) << writer.status();
    writer_ = std::move(*writer);
  }
  void TearDown() override {
    writer_.reset();
    std::filesystem::remove(path_);
  }

  // Every line of the file, parsed (fails the test on a line that is not JSON).
  std::vector<Json> Lines() const {
    std::ifstream in(path_);
    std::vector<Json> lines;
    std::string line;
    while (std::getline(in, line)) {
      Json parsed = Json::parse(line, nullptr, /*allow_exceptions=*/false);
      EXPECT_FALSE(parsed.is_discarded()) << "not JSON: " << line;
      lines.push_back(std::move(parsed));
    }
    return lines;
  }

  void Send(uint64_t step_number, const ScheduledStep& step, int sent_ms,
            double schedule_s = 2e-5) {
    writer_->OnPlanSent(step_number, step, namer_, schedule_s, start_ + milliseconds(sent_ms));
  }
  void Answer(uint64_t step_number, double device_s, int received_ms) {
    wv1::StepResult result;
    result.set_step(step_number);
    result.mutable_timings()->set_host_seconds(0.001);
    result.mutable_timings()->set_device_seconds(device_s);
    result.mutable_timings()->set_sample_seconds(0.0005);
    result.mutable_timings()->set_total_seconds(device_s + 0.0015);
    writer_->OnResult(step_number, result, start_ + milliseconds(received_ms));
  }

  const Clock::time_point start_ = Clock::now();
  std::string path_;
  std::unique_ptr<StepRecorder> writer_;
  // Engine ids 1 and 2 have client request ids; others fall back to the engine id.
  const StepRecorder::RequestNamer namer_ = [](uint64_t id) {
    if (id == 1) return std::string("client-a");
    if (id == 2) return std::string("client-b");
    return std::to_string(id);
  };
};

ScheduledRequest Req(RequestId id, int32_t slot, bool is_new, bool is_prefill, bool samples,
                     int32_t start, int32_t tokens) {
  ScheduledRequest r;
  r.request_id = id;
  r.slot = slot;
  r.is_new = is_new;
  r.is_prefill = is_prefill;
  r.samples = samples;
  r.start_position = start;
  r.num_tokens = tokens;
  return r;
}

// A mixed step: request 1 decodes while request 3 (no client id) starts a prefill chunk.
ScheduledStep MixedStep() {
  ScheduledStep step;
  step.requests.push_back(Req(1, 0, false, false, true, 130, 1));
  step.requests.push_back(Req(3, 1, true, true, false, 0, 64));
  step.dropped_slots = {4, 5};
  step.num_batched_tokens = 65;
  step.num_prefill_tokens = 64;
  return step;
}

ScheduledStep DecodeStep(RequestId id, int32_t start) {
  ScheduledStep step;
  step.requests.push_back(Req(id, 0, false, false, true, start, 1));
  step.num_batched_tokens = 1;
  return step;
}

std::vector<std::string> Keys(const Json& object) {
  std::vector<std::string> keys;
  for (const auto& item : object.items()) keys.push_back(item.key());
  return keys;
}

TEST_F(StepTraceTest, LineHasExactlyTheDocumentedFieldsAndValues) {
  Send(1, MixedStep(), /*sent_ms=*/150, /*schedule_s=*/1.2e-5);
  Answer(1, /*device_s=*/0.031, /*received_ms=*/184);
  writer_->Close();
  ASSERT_TRUE(writer_->status().ok()) << writer_->status();

  const std::vector<Json> lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  const Json& line = lines[0];
  EXPECT_THAT(Keys(line),
              ElementsAre("step", "sent_s", "batch_size", "num_tokens", "num_prefill_tokens",
                          "num_dropped_slots", "schedule_s", "requests", "host_s", "device_s",
                          "sample_s", "total_s", "graph_replayed", "round_trip_s"));
  EXPECT_EQ(line["step"], 1);
  EXPECT_DOUBLE_EQ(line["sent_s"].get<double>(), 0.15);
  EXPECT_EQ(line["batch_size"], 2);
  EXPECT_EQ(line["num_tokens"], 65);
  EXPECT_EQ(line["num_prefill_tokens"], 64);
  EXPECT_EQ(line["num_dropped_slots"], 2);
  EXPECT_DOUBLE_EQ(line["schedule_s"].get<double>(), 1.2e-5);
  EXPECT_DOUBLE_EQ(line["host_s"].get<double>(), 0.001);
  EXPECT_DOUBLE_EQ(line["device_s"].get<double>(), 0.031);
  EXPECT_DOUBLE_EQ(line["sample_s"].get<double>(), 0.0005);
  EXPECT_DOUBLE_EQ(line["total_s"].get<double>(), 0.0325);
  EXPECT_EQ(line["graph_replayed"], false);
  EXPECT_DOUBLE_EQ(line["round_trip_s"].get<double>(), 0.034);

  ASSERT_EQ(line["requests"].size(), 2u);
  const Json& decode = line["requests"][0];
  EXPECT_THAT(Keys(decode), ElementsAre("id", "tokens", "kind", "start", "samples", "new"));
  EXPECT_EQ(decode["id"], "client-a");
  EXPECT_EQ(decode["tokens"], 1);
  EXPECT_EQ(decode["kind"], "decode");
  EXPECT_EQ(decode["start"], 130);
  EXPECT_EQ(decode["samples"], true);
  EXPECT_EQ(decode["new"], false);
  const Json& prefill = line["requests"][1];
  EXPECT_EQ(prefill["id"], "3");  // no client id: the engine id
  EXPECT_EQ(prefill["tokens"], 64);
  EXPECT_EQ(prefill["kind"], "prefill");
  EXPECT_EQ(prefill["start"], 0);
  EXPECT_EQ(prefill["samples"], false);
  EXPECT_EQ(prefill["new"], true);
}

TEST_F(StepTraceTest, ResultsJoinTheirOwnStepWithTwoInFlight) {
  Send(1, DecodeStep(1, 10), 0);
  Send(2, DecodeStep(2, 20), 5);  // plan 2 leaves before result 1
  EXPECT_EQ(writer_->num_pending(), 2u);
  Answer(1, 0.010, 12);
  EXPECT_EQ(writer_->lines_written(), 1u);
  Send(3, DecodeStep(1, 11), 13);
  Answer(2, 0.020, 30);
  Answer(3, 0.030, 47);
  writer_->Close();

  const std::vector<Json> lines = Lines();
  ASSERT_EQ(lines.size(), 3u);
  const double expected_device[] = {0.010, 0.020, 0.030};
  const double expected_round_trip[] = {0.012, 0.025, 0.034};
  const char* expected_id[] = {"client-a", "client-b", "client-a"};
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(lines[i]["step"], i + 1);
    EXPECT_EQ(lines[i]["requests"][0]["id"], expected_id[i]);
    EXPECT_DOUBLE_EQ(lines[i]["device_s"].get<double>(), expected_device[i]);
    EXPECT_DOUBLE_EQ(lines[i]["round_trip_s"].get<double>(), expected_round_trip[i]);
  }
}

TEST_F(StepTraceTest, CloseWritesPendingStepsWithNullResults) {
  Send(1, MixedStep(), 0);
  Send(2, DecodeStep(1, 131), 1);
  Answer(1, 0.01, 20);
  writer_->Close();
  writer_->Close();  // idempotent
  EXPECT_EQ(writer_->num_pending(), 0u);

  const std::vector<Json> lines = Lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["step"], 2);
  EXPECT_EQ(lines[1]["batch_size"], 1);
  EXPECT_EQ(lines[1]["num_tokens"], 1);
  for (const char* key : kResultKeys) {
    ASSERT_TRUE(lines[1].contains(key)) << key;
    EXPECT_TRUE(lines[1][key].is_null()) << key;
    EXPECT_FALSE(lines[0][key].is_null()) << key;
  }
}

TEST_F(StepTraceTest, NewStreamAndLostResultsAreWrittenUnanswered) {
  Send(1, DecodeStep(1, 10), 0);
  Send(2, DecodeStep(1, 11), 1);
  // The stream broke: the engine reconnects and numbers steps from 1 again.
  Send(1, DecodeStep(2, 0), 50);
  EXPECT_EQ(writer_->lines_written(), 2u);
  Answer(7, 0.5, 60);  // a stale result for a step that is not pending: ignored
  EXPECT_EQ(writer_->lines_written(), 2u);
  Send(2, DecodeStep(2, 1), 51);
  Answer(2, 0.02, 70);  // result 1 never came: step 1 is written unanswered first
  writer_->Close();

  const std::vector<Json> lines = Lines();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["step"], 1);
  EXPECT_TRUE(lines[0]["device_s"].is_null());
  EXPECT_EQ(lines[1]["step"], 2);
  EXPECT_TRUE(lines[1]["device_s"].is_null());
  EXPECT_EQ(lines[2]["step"], 1);
  EXPECT_EQ(lines[2]["requests"][0]["id"], "client-b");
  EXPECT_TRUE(lines[2]["device_s"].is_null());
  EXPECT_EQ(lines[3]["step"], 2);
  EXPECT_DOUBLE_EQ(lines[3]["device_s"].get<double>(), 0.02);
}

TEST_F(StepTraceTest, DropOnlyStepHasAnEmptyBatch) {
  ScheduledStep drop_only;
  drop_only.dropped_slots = {3};
  Send(1, drop_only, 0);
  Answer(1, 0.0, 1);
  writer_->Close();
  const std::vector<Json> lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["batch_size"], 0);
  EXPECT_TRUE(lines[0]["requests"].is_array());
  EXPECT_TRUE(lines[0]["requests"].empty());
  EXPECT_EQ(lines[0]["num_dropped_slots"], 1);
}

TEST_F(StepTraceTest, LinesAreOnDiskBeforeClose) {
  // A router killed with -9 never calls Close: answered lines must already be in the file.
  Send(1, DecodeStep(1, 10), 0);
  Answer(1, 0.01, 10);
  Send(2, DecodeStep(1, 11), 11);
  const std::vector<Json> lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["step"], 1);
}

// The console's feed: records go to it only while someone watches, tagged with the engine's
// worker, the same JSON as the file's lines; a file-less recorder builds nothing unwatched.
TEST_F(StepTraceTest, FeedGetsTheFileLinesOnlyWhileWatched) {
  console::StepFeed feed(console::StepFeedOptions{});
  writer_->AttachFeed(&feed, 2);
  Send(1, DecodeStep(1, 10), 0);
  Answer(1, 0.01, 10);  // unwatched: the file only
  auto subscription = feed.Subscribe();
  Send(2, MixedStep(), 11);
  Answer(2, 0.02, 20);
  const std::vector<std::string> records = subscription->Take(milliseconds(0));
  ASSERT_EQ(records.size(), 1u);
  Json record = Json::parse(records[0]);
  EXPECT_EQ(record["worker"], 2);
  record.erase("worker");
  const std::vector<Json> lines = Lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(record, lines[1]);
}

TEST(StepRecorderFeedTest, WithoutFileRecordsOnlyWhileWatched) {
  console::StepFeed feed(console::StepFeedOptions{});
  const std::unique_ptr<StepRecorder> recorder = StepRecorder::WithoutFile();
  recorder->AttachFeed(&feed, 0);
  const StepRecorder::RequestNamer namer = [](uint64_t id) { return std::to_string(id); };
  recorder->OnPlanSent(1, DecodeStep(5, 3), namer, 0, Clock::now());
  EXPECT_EQ(recorder->num_pending(), 0u) << "nobody watches: nothing should be kept";
  auto subscription = feed.Subscribe();
  recorder->OnPlanSent(2, DecodeStep(5, 4), namer, 0, Clock::now());
  wv1::StepResult result;
  result.set_step(2);
  recorder->OnResult(2, result, Clock::now());
  const std::vector<std::string> records = subscription->Take(milliseconds(0));
  ASSERT_EQ(records.size(), 1u);
  const Json record = Json::parse(records[0]);
  EXPECT_EQ(record["step"], 2);
  EXPECT_EQ(record["requests"][0]["id"], "5");
  EXPECT_EQ(recorder->lines_written(), 0u);
}

TEST(StepTraceOpenTest, UnwritablePathIsAnError) {
  auto writer = StepRecorder::Open("/nonexistent-dir/trace.jsonl");
  ASSERT_FALSE(writer.ok());
  EXPECT_THAT(std::string(writer.status().message()),
              ::testing::HasSubstr("/nonexistent-dir/trace.jsonl"));
}

}  // namespace
}  // namespace tessera::router
