#include "router/step_recorder.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tessera::router {
namespace {

namespace wv1 = ::tessera::worker::v1;
// ordered_json keeps the keys in insertion order, so every line reads in the documented order.
using Json = nlohmann::ordered_json;

// Times are kept to 0.1 µs: finer digits are noise from the clock and only make lines longer
// (nlohmann prints the shortest form that round-trips, so rounded values print short).
double Round(double seconds) { return std::round(seconds * 1e7) / 1e7; }

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

Json RequestsJson(const auto& requests) {
  Json out = Json::array();
  for (const auto& r : requests) {
    out.push_back(Json{{"id", r.name},
                       {"tokens", r.num_tokens},
                       {"kind", r.is_prefill ? "prefill" : "decode"},
                       {"start", r.start_position},
                       {"samples", r.samples},
                       {"new", r.is_new}});
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<StepRecorder>> StepRecorder::Open(const std::string& path,
                                                                  Clock::time_point start) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot open step trace '", path, "' for writing: ", std::strerror(errno)));
  }
  return std::unique_ptr<StepRecorder>(new StepRecorder(file, path, start));
}

std::unique_ptr<StepRecorder> StepRecorder::WithoutFile(Clock::time_point start) {
  return std::unique_ptr<StepRecorder>(new StepRecorder(nullptr, "", start));
}

StepRecorder::StepRecorder(std::FILE* file, std::string path, Clock::time_point start)
    : file_(file), path_(std::move(path)), start_(start) {}

void StepRecorder::AttachFeed(console::StepFeed* feed, int worker) {
  feed_ = feed;
  feed_worker_ = worker;
}

StepRecorder::~StepRecorder() { Close(); }

void StepRecorder::OnPlanSent(uint64_t step_number, const ScheduledStep& step,
                              const RequestNamer& request_name, double schedule_seconds,
                              Clock::time_point sent) {
  if (!Recording()) return;
  // Step numbers grow within one worker stream; a smaller one means the engine reconnected and
  // the older steps will never be answered.
  if (!pending_.empty() && step_number <= pending_.back().step) FlushPendingUnanswered();
  PendingStep& pending = pending_.emplace_back();
  pending.step = step_number;
  pending.sent = sent;
  pending.sent_seconds = Seconds(sent - start_);
  pending.schedule_seconds = schedule_seconds;
  pending.num_tokens = step.num_batched_tokens;
  pending.num_prefill_tokens = step.num_prefill_tokens;
  pending.num_dropped_slots = static_cast<int32_t>(step.dropped_slots.size());
  pending.requests.reserve(step.requests.size());
  for (const ScheduledRequest& r : step.requests) {
    pending.requests.push_back(RequestEntry{.name = request_name(r.request_id),
                                            .num_tokens = r.num_tokens,
                                            .start_position = r.start_position,
                                            .is_prefill = r.is_prefill,
                                            .samples = r.samples,
                                            .is_new = r.is_new});
  }
}

void StepRecorder::OnResult(uint64_t step_number, const wv1::StepResult& result,
                            Clock::time_point received) {
  size_t index = 0;
  while (index < pending_.size() && pending_[index].step != step_number) ++index;
  if (index == pending_.size()) return;  // not ours: a stale stream's result
  // Results come in plan order: steps older than this one lost their results with a stream.
  for (size_t i = 0; i < index; ++i) {
    Emit(pending_.front(), nullptr, received);
    pending_.pop_front();
  }
  Emit(pending_.front(), &result, received);
  pending_.pop_front();
}

void StepRecorder::Close() {
  FlushPendingUnanswered();
  if (file_ != nullptr) {
    if (std::fclose(file_) != 0 && status_.ok()) {
      status_ = absl::DataLossError(
          absl::StrCat("closing step trace '", path_, "': ", std::strerror(errno)));
    }
    file_ = nullptr;
  }
}

void StepRecorder::FlushPendingUnanswered() {
  while (!pending_.empty()) {
    Emit(pending_.front(), nullptr, Clock::time_point{});
    pending_.pop_front();
  }
}

void StepRecorder::Emit(const PendingStep& step, const wv1::StepResult* result,
                        Clock::time_point received) {
  Json line{{"step", step.step},
            {"sent_s", Round(step.sent_seconds)},
            {"batch_size", step.requests.size()},
            {"num_tokens", step.num_tokens},
            {"num_prefill_tokens", step.num_prefill_tokens},
            {"num_dropped_slots", step.num_dropped_slots},
            {"schedule_s", Round(step.schedule_seconds)},
            {"requests", RequestsJson(step.requests)}};
  if (result != nullptr) {
    const wv1::StepTimings& t = result->timings();
    line["host_s"] = Round(t.host_seconds());
    line["device_s"] = Round(t.device_seconds());
    line["sample_s"] = Round(t.sample_seconds());
    line["total_s"] = Round(t.total_seconds());
    line["graph_replayed"] = t.graph_replayed();
    line["round_trip_s"] = Round(Seconds(received - step.sent));
  } else {
    for (const char* key :
         {"host_s", "device_s", "sample_s", "total_s", "graph_replayed", "round_trip_s"}) {
      line[key] = nullptr;
    }
  }
  const std::string record = line.dump();
  if (file_ != nullptr) WriteLine(record);
  if (feed_ != nullptr) feed_->Publish(feed_worker_, record);
}

void StepRecorder::WriteLine(const std::string& line) {
  // One fwrite per line into stdio's buffer, then fflush: the line reaches the kernel whole, so
  // a killed router leaves complete lines behind.
  const bool ok = std::fwrite(line.data(), 1, line.size(), file_) == line.size() &&
                  std::fputc('\n', file_) != EOF && std::fflush(file_) == 0;
  if (!ok) {
    // A full disk must not take the router down: report once, stop tracing.
    status_ = absl::DataLossError(
        absl::StrCat("writing step trace '", path_, "': ", std::strerror(errno)));
    std::fprintf(stderr, "tessera-router: %s; tracing stopped\n", status_.ToString().c_str());
    std::fclose(file_);
    file_ = nullptr;
    return;
  }
  ++lines_written_;
}

}  // namespace tessera::router
