#include "kernels/simt/schedule.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/util/absl_compat.h"

namespace tessera::simt {

absl::StatusOr<Schedule> Schedule::Parse(std::string_view text) {
  if (text == "in-order") return InOrder();
  if (text == "reverse") return Reverse();
  if (text == "lowest-first") return LowestFirst();
  constexpr std::string_view kRandomPrefix = "random:";
  uint64_t seed = 0;
  if (text.starts_with(kRandomPrefix) &&
      absl::SimpleAtoi(util::ToAbsl(text.substr(kRandomPrefix.size())), &seed)) {
    return Random(seed);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown SIMT schedule '", util::ToAbsl(text),
      "' (in-order, reverse, lowest-first or random:SEED)"));
}

std::string Schedule::ToString() const {
  switch (kind) {
    case ScheduleKind::kInOrder: return "in-order";
    case ScheduleKind::kReverse: return "reverse";
    case ScheduleKind::kLowestFirst: return "lowest-first";
    case ScheduleKind::kRandom: return absl::StrCat("random:", seed);
  }
  return "?";
}

}  // namespace tessera::simt
