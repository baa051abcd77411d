#include "worker/cuda/device_slot_sampling.h"

#include "common/util/check.h"

namespace tessera::worker {

DeviceSlotSampling::DeviceSlotSampling(int max_num_seqs)
    : slots_(static_cast<size_t>(max_num_seqs)) {}

void DeviceSlotSampling::Begin(int slot, const sampling::SamplingParams& params,
                               std::span<const int32_t> prompt,
                               std::span<const int32_t> generated) {
  TESSERA_CHECK(slot >= 0 && slot < max_num_seqs() && !slots_[slot].started,
                "DeviceSlotSampling::Begin: slot out of range or already started");
  SlotState& s = slots_[slot];
  s.started = true;
  s.params = params;
  s.penalized = params.repetition_penalty != 1.0f || params.presence_penalty != 0.0f ||
                params.frequency_penalty != 0.0f;
  s.seen.clear();
  if (!s.penalized) return;
  for (int32_t token : prompt) s.seen[token].in_prompt = true;
  for (int32_t token : generated) ++s.seen[token].generated;
}

void DeviceSlotSampling::End(int slot) {
  TESSERA_CHECK(started(slot), "DeviceSlotSampling::End: slot not started");
  slots_[slot].started = false;
  slots_[slot].seen.clear();
}

cuda::SamplingRowParams DeviceSlotSampling::RowParams(int slot, int64_t position) const {
  const sampling::SamplingParams& p = slots_[slot].params;
  return {.temperature = p.temperature,
          .top_k = p.top_k,
          .top_p = p.top_p,
          .min_p = p.min_p,
          .repetition_penalty = p.repetition_penalty,
          .presence_penalty = p.presence_penalty,
          .frequency_penalty = p.frequency_penalty,
          .num_logprobs = p.num_logprobs,
          .seed = p.seed,
          .position = static_cast<uint64_t>(position),
          .active = 1};
}

void DeviceSlotSampling::PenaltyEntries(int slot, std::vector<int32_t>* tokens,
                                        std::vector<int32_t>* counts,
                                        std::vector<uint8_t>* in_prompt) const {
  tokens->clear();
  counts->clear();
  in_prompt->clear();
  for (const auto& [token, seen] : slots_[slot].seen) {
    tokens->push_back(token);
    counts->push_back(seen.generated);
    in_prompt->push_back(seen.in_prompt ? 1 : 0);
  }
}

void DeviceSlotSampling::Record(int slot, int32_t token) {
  SlotState& s = slots_[slot];
  if (s.penalized) ++s.seen[token].generated;
}

}  // namespace tessera::worker
