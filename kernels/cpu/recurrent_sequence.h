// Per-sequence addressing shared by the recurrent-state kernels of linear-attention layers
// (causal_conv1d.h, gated_delta_rule.h): which rows of the step's activations a sequence owns and
// which state slot holds its recurrent state.
//
// A step's activations hold the rows of every sequence back to back (as for PagedAttention);
// each sequence carries its own state slot in a backend-owned pool [num_slots, state_elements].
// Kernels read and update only the slots named, so a sequence's result never depends on the
// other sequences of the step (batch invariance, DESIGN.md §6).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/util/check.h"

namespace tessera::kernels::cpu {

struct RecurrentSequence {
  int64_t token_begin = 0;  // first row of this sequence in the step's activations
  int64_t num_tokens = 0;   // rows [token_begin, token_begin + num_tokens); 0 leaves state as is
  int64_t state_slot = 0;   // index into the state pool, in [0, num_slots)
};

// Checks that sequences are back to back from row 0, that every slot is in [0, num_slots) and
// that no slot appears twice (two sequences updating one state would race). Returns the total
// number of rows. `who` names the kernel in the failure message.
inline int64_t ValidateRecurrentSequences(std::span<const RecurrentSequence> sequences,
                                          int64_t num_slots, const char* who) {
  // Marks of the slots seen, kept per thread and cleared after use so that steady-state steps
  // do not allocate.
  thread_local std::vector<bool> used;
  if (static_cast<int64_t>(used.size()) < num_slots) used.resize(static_cast<size_t>(num_slots));
  int64_t rows = 0;
  bool distinct = true;
  for (const RecurrentSequence& s : sequences) {
    TESSERA_CHECK(s.token_begin == rows, who);  // sequences must be back to back
    TESSERA_CHECK(s.num_tokens >= 0, who);      // negative token count
    TESSERA_CHECK(s.state_slot >= 0 && s.state_slot < num_slots, who);  // slot out of range
    distinct = distinct && !used[static_cast<size_t>(s.state_slot)];
    used[static_cast<size_t>(s.state_slot)] = true;
    rows += s.num_tokens;
  }
  for (const RecurrentSequence& s : sequences) used[static_cast<size_t>(s.state_slot)] = false;
  TESSERA_CHECK(distinct, who);  // two sequences name the same slot
  return rows;
}

// Elements a strided row view [rows, width] (row r at r * stride) spans; 0 for no rows.
inline int64_t StridedExtent(int64_t rows, int64_t stride, int64_t width) {
  return rows == 0 ? 0 : (rows - 1) * stride + width;
}

}  // namespace tessera::kernels::cpu
