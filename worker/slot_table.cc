#include "worker/slot_table.h"

#include "common/util/check.h"

namespace tessera::worker {

SlotTable::SlotTable(int max_num_seqs, int64_t num_blocks, int block_size)
    : block_size_(block_size),
      slots_(static_cast<size_t>(max_num_seqs)),
      block_refs_(static_cast<size_t>(num_blocks), 0),
      cached_refs_(static_cast<size_t>(num_blocks), 0) {
  TESSERA_CHECK(max_num_seqs >= 1, "SlotTable: max_num_seqs must be >= 1");
  TESSERA_CHECK(num_blocks >= 2, "SlotTable: need the null block and at least one more");
  TESSERA_CHECK(block_size >= 1, "SlotTable: block_size must be >= 1");
}

void SlotTable::Admit(int slot, const SlotAdmission& admission) {
  Slot& s = slots_[slot];
  TESSERA_CHECK(!s.active, "SlotTable::Admit: slot is busy");
  TESSERA_CHECK(admission.num_prompt_tokens >= 1 &&
                    admission.num_prompt_tokens <= static_cast<int32_t>(admission.tokens.size()),
                "SlotTable::Admit: num_prompt_tokens out of range");
  TESSERA_CHECK(admission.num_cached_tokens % block_size_ == 0 &&
                    admission.num_cached_tokens < static_cast<int32_t>(admission.tokens.size()),
                "SlotTable::Admit: bad num_cached_tokens");
  s.active = true;
  s.tokens.assign(admission.tokens.begin(), admission.tokens.end());
  s.num_prompt_tokens = admission.num_prompt_tokens;
  s.num_cached_tokens = admission.num_cached_tokens;
  // The cached prefix's K/V is already in the pool.
  s.num_computed = admission.num_cached_tokens;
  s.block_table.clear();
  s.return_logprob = admission.return_logprob;
  s.cached_blocks_counted = admission.num_cached_tokens == 0;
  ++num_active_;
}

void SlotTable::AppendBlocks(int slot, std::span<const int32_t> blocks) {
  Slot& s = slots_[slot];
  TESSERA_CHECK(s.active, "SlotTable::AppendBlocks: slot is free");
  for (int32_t block : blocks) {
    TESSERA_CHECK(block >= 1 && block < num_blocks(), "SlotTable::AppendBlocks: bad block id");
    s.block_table.push_back(block);
    ++block_refs_[block];
  }
  const int32_t num_cached_blocks = s.num_cached_blocks(block_size_);
  if (!s.cached_blocks_counted && static_cast<int32_t>(s.block_table.size()) >= num_cached_blocks) {
    for (int32_t b = 0; b < num_cached_blocks; ++b) ++cached_refs_[s.block_table[b]];
    s.cached_blocks_counted = true;
  }
}

void SlotTable::Drop(int slot) {
  Slot& s = slots_[slot];
  TESSERA_CHECK(s.active, "SlotTable::Drop: slot is free");
  if (s.cached_blocks_counted) {
    const int32_t num_cached_blocks = s.num_cached_blocks(block_size_);
    for (int32_t b = 0; b < num_cached_blocks; ++b) {
      TESSERA_CHECK(cached_refs_[s.block_table[b]] > 0, "SlotTable::Drop: cached refs underflow");
      --cached_refs_[s.block_table[b]];
    }
  }
  for (int32_t block : s.block_table) {
    TESSERA_CHECK(block_refs_[block] > 0, "SlotTable::Drop: block refs underflow");
    --block_refs_[block];
  }
  // clear() keeps the vectors' capacity for the slot's next sequence.
  s.active = false;
  s.tokens.clear();
  s.block_table.clear();
  s.num_prompt_tokens = 0;
  s.num_computed = 0;
  s.num_cached_tokens = 0;
  s.cached_blocks_counted = false;
  --num_active_;
}

}  // namespace tessera::worker
