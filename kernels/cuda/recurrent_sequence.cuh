// Per-sequence addressing of the recurrent-state kernels of linear-attention layers
// (causal_conv1d.cuh, gated_delta_rule.cuh): the device twin of kernels/cpu/recurrent_sequence.h.
//
// A step's activations hold the rows of every sequence back to back; each sequence names the
// slot of a backend-owned state pool [num_slots, state_elements] f32 that holds its recurrent
// state. The kernels read and advance only the slots named, so a sequence's result never depends
// on the other sequences of the launch. A sequence with num_tokens == 0 or a negative state_slot
// (a padding row of a captured CUDA graph, DESIGN.md §5) reads and writes nothing.
#pragma once

namespace tessera::cuda {

// Plain ints (a step holds < 2^31 rows and slots), 12 bytes, copied to the device as an array.
struct DeviceRecurrentSequence {
  int token_begin;  // first row of this sequence in the step's activations
  int num_tokens;   // rows [token_begin, token_begin + num_tokens)
  int state_slot;   // index into the state pool, or < 0 for a padding entry
};

}  // namespace tessera::cuda
