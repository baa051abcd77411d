// The worker's per-request execution state: one slot per sequence the router placed here
// (DESIGN.md §2). A slot holds everything the step protocol lets the router leave out of a plan:
// the known tokens (prompt, tokens generated before a preemption, every token sampled since), how
// many of them are computed (their K/V is in the pool) and the block table. The sequence's
// sampling state (parameters, penalty counts, RNG) is not here: the runner owns it, keyed by the
// same slot id (ModelRunner::BeginSequence / EndSequence, which the step executor calls next to
// Admit / Drop).
//
// It also counts, per physical block, how many live slots list it in their block table and how
// many in their cached prefix (the blocks a prefix-cache hit shares, which no step may write);
// the step executor's validation reads those counts to refuse writes into shared blocks.
//
// The table never checks untrusted input: the step executor validates a plan completely before
// calling any mutator, and the mutators' preconditions (TESSERA_CHECK) only catch executor bugs.
// Slot vectors keep their capacity across reuse, so a warm table allocates nothing per step.
//
// Ownership/threading: owned by the StepExecutor; used only from the worker's step thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tessera::worker {

struct Slot {
  bool active = false;
  std::vector<int32_t> tokens;        // all known tokens: prompt, then generated ones
  int32_t num_prompt_tokens = 0;      // tokens[0, num_prompt_tokens) is the prompt
  int32_t num_computed = 0;           // tokens[0, num_computed) have their K/V in the pool
  int32_t num_cached_tokens = 0;      // prefix shared from the cache; its blocks are read-only
  std::vector<int32_t> block_table;   // logical block -> physical block, append-only
  bool return_logprob = false;        // the sampled token's logprob (and top-N) go into results
  bool cached_blocks_counted = false; // its cached blocks are in SlotTable::cached_refs

  int32_t num_known() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_cached_blocks(int block_size) const { return num_cached_tokens / block_size; }
};

// What a NewSequence carries, already validated and converted.
struct SlotAdmission {
  std::span<const int32_t> tokens;    // prompt, then tokens generated before a preemption
  int32_t num_prompt_tokens = 0;      // in [1, tokens.size()]
  int32_t num_cached_tokens = 0;      // multiple of block_size, < tokens.size()
  bool return_logprob = false;
};

class SlotTable {
 public:
  // Preconditions: max_num_seqs >= 1, num_blocks >= 2, block_size >= 1.
  SlotTable(int max_num_seqs, int64_t num_blocks, int block_size);

  int max_num_seqs() const { return static_cast<int>(slots_.size()); }
  int64_t num_blocks() const { return static_cast<int64_t>(cached_refs_.size()); }
  int block_size() const { return block_size_; }
  int num_active() const { return num_active_; }

  // Precondition: 0 <= slot < max_num_seqs (the executor checked).
  const Slot& at(int slot) const { return slots_[slot]; }
  Slot& at(int slot) { return slots_[slot]; }

  // Live slots listing `block` anywhere in their block table.
  int32_t block_refs(int32_t block) const { return block_refs_[block]; }
  // Live slots listing `block` in their cached (shared, read-only) prefix.
  int32_t cached_refs(int32_t block) const { return cached_refs_[block]; }

  // Starts a sequence in a free slot. Precondition: the slot is free, `admission` is valid.
  void Admit(int slot, const SlotAdmission& admission);

  // Appends blocks to an active slot's table (counted in block_refs); once the table holds the
  // cached prefix, counts those blocks in cached_refs. Precondition: ids in [1, num_blocks), none already listed.
  void AppendBlocks(int slot, std::span<const int32_t> blocks);

  // Ends an active slot's sequence (finished or preempted). Precondition: the slot is active.
  void Drop(int slot);

 private:
  int block_size_;
  int num_active_ = 0;
  std::vector<Slot> slots_;           // [max_num_seqs]
  std::vector<int32_t> block_refs_;   // [num_blocks]
  std::vector<int32_t> cached_refs_;  // [num_blocks]
};

}  // namespace tessera::worker
