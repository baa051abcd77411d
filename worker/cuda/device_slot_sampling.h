// Per-slot sampling state of a device runner: each started slot's parameters and, when it uses
// repetition/presence/frequency penalties, the tokens of its prompt and output with their
// counts (sorted, ready to become one CSR row of cuda::SamplingPenalties). The RNG needs no
// state: the device sampler draws from Philox keyed by (seed, position), so a sequence
// re-admitted after a preemption draws exactly what it would have drawn.
//
// Owned by the device runner; step thread only.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "common/sampling/sampling_params.h"
#include "kernels/cuda/sampling_types.h"

namespace tessera::worker {

class DeviceSlotSampling {
 public:
  explicit DeviceSlotSampling(int max_num_seqs);

  int max_num_seqs() const { return static_cast<int>(slots_.size()); }
  // Preconditions (TESSERA_CHECK): slot in range; Begin on a free slot, End on a started one.
  void Begin(int slot, const sampling::SamplingParams& params, std::span<const int32_t> prompt,
             std::span<const int32_t> generated);
  void End(int slot);
  bool started(int slot) const {
    return slot >= 0 && slot < max_num_seqs() && slots_[slot].started;
  }
  const sampling::SamplingParams& params(int slot) const { return slots_[slot].params; }

  // The kernel's row for `slot` sampling the token at `position` (its known token count).
  cuda::SamplingRowParams RowParams(int slot, int64_t position) const;
  bool has_penalties(int slot) const { return slots_[slot].penalized; }
  // Distinct ids seen (ascending) with their output counts and prompt flags.
  void PenaltyEntries(int slot, std::vector<int32_t>* tokens, std::vector<int32_t>* counts,
                      std::vector<uint8_t>* in_prompt) const;
  // Records a token the slot generated (it counts for its penalties from now on).
  void Record(int slot, int32_t token);

 private:
  struct Seen {
    int32_t generated = 0;
    bool in_prompt = false;
  };
  struct SlotState {
    bool started = false;
    bool penalized = false;
    sampling::SamplingParams params;
    std::map<int32_t, Seen> seen;  // only when penalized
  };

  std::vector<SlotState> slots_;
};

}  // namespace tessera::worker
