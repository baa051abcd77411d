#include "router/scheduler_config.h"

#include "absl/strings/str_cat.h"

namespace tessera::router {
namespace {

absl::Status AtLeast(const char* field, int64_t value, int64_t min) {
  if (value >= min) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("scheduler config: ", field, " = ", value, ", must be >= ", min));
}

}  // namespace

absl::Status ValidateSchedulerConfig(const SchedulerConfig& c) {
  for (const absl::Status& s : {
           AtLeast("max_num_batched_tokens", c.max_num_batched_tokens, 1),
           AtLeast("max_num_seqs", c.max_num_seqs, 1),
           AtLeast("block_size", c.block_size, 1),
           // The null block plus at least one usable block.
           AtLeast("num_blocks", c.num_blocks, 2),
           // prompt >= 1 and max_tokens >= 1.
           AtLeast("max_context", c.max_context, 2),
           AtLeast("max_waiting", c.max_waiting, 0),
           AtLeast("max_prefill_tokens_per_step", c.max_prefill_tokens_per_step, 0),
           AtLeast("prefix_cache_hash_bits", c.prefix_cache_hash_bits, 1),
           AtLeast("reserve_horizon_tokens", c.reserve_horizon_tokens, 0),
           AtLeast("max_overtakes", c.max_overtakes, 0),
           AtLeast("state_snapshot_slots", c.state_snapshot_slots, 0),
       }) {
    if (!s.ok()) return s;
  }
  if (c.prefix_cache_hash_bits > 64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scheduler config: prefix_cache_hash_bits = ", c.prefix_cache_hash_bits,
        ", must be <= 64"));
  }
  return absl::OkStatus();
}

}  // namespace tessera::router
