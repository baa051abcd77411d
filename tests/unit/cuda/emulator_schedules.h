// The SIMT schedules every emulated kernel test runs under (a test-harness setting, DESIGN §11):
// in-order, reverse, a random seed and lowest-first (one warp runs ahead of the others). TESSERA_SIMT_SCHEDULES (comma-separated, e.g.
// "random:11,random:12") replaces the list for a run; read here, in the test harness, never in
// the library.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "kernels/simt/schedule.h"

namespace tessera::simt {

inline std::vector<Schedule> TestSchedules() {
  const char* text = std::getenv("TESSERA_SIMT_SCHEDULES");
  if (text == nullptr || *text == '\0') {
    return {Schedule::InOrder(), Schedule::Reverse(), Schedule::Random(1),
            Schedule::LowestFirst()};
  }
  std::vector<Schedule> schedules;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    absl::StatusOr<Schedule> schedule = Schedule::Parse(std::string_view(part.data(), part.size()));
    if (!schedule.ok()) {  // a typo in the harness setting must not pass silently
      std::fprintf(stderr, "TESSERA_SIMT_SCHEDULES: %s\n", schedule.status().ToString().c_str());
      std::abort();
    }
    schedules.push_back(*schedule);
  }
  return schedules;
}

// gtest parameter names: "in_order", "reverse", "random_1".
inline std::string ScheduleTestName(const Schedule& schedule) {
  std::string name = schedule.ToString();
  for (char& c : name) {
    if (c == '-' || c == ':') c = '_';
  }
  return name;
}

}  // namespace tessera::simt
