// The ops a model definition calls (DESIGN.md §5), and the argument types they share. Every
// backend implements them once, for every model: worker/cpu/cpu_model_ops.h and
// worker/cuda/device_model_ops.h. A model definition (llama_model.h, hybrid_model.h) never names
// a backend; an op never names an architecture. Weights are named by WeightId (the model's
// WeightDeclaration), activations by ActId (its ActivationTable); the backend owns both.
//
// The Ops concept (duck-typed, checked where a forward function is instantiated):
//   bool Has(WeightId)                   an optional tensor is present
//   Embed(table, out)                    out[n, hidden] = rows of `table` for the step's tokens
//   RmsNorm(in, weight, out, groups)     normalise each `width/groups`-wide group of every row
//   Project(in, {{weight, out}, ...})    out = in · weightᵀ, up to 4 weights sharing `in`
//   AddBias(bias, inout)                 inout[r, :] += bias
//   AddRmsNorm(inout, delta, weight, out) Add(inout, delta), then RmsNorm(inout, weight, out, 1)
//                                        (one launch; out aliases neither input)
//   RotaryAttend(kv_layer, q, k, v, out) rotary embedding on q and k in place at the step's
//                                        positions (the config's rope_dim of each head, normal
//                                        or NeoX), k/v into attention layer `kv_layer`'s paged
//                                        pool through the slot mapping (one launch for the
//                                        three on the device), then causal paged attention
//   RotaryAttendQkv(kv_layer, qkv, biases, q, k, v, out)  the same from rows of [q | k | v]
//                                        (one QKV projection), the biases added first; q
//                                        receives the rotated q (k, v: scratch a backend may use
//                                        to split the rows)
//   ProjectSwiGlu(in, weight, gate_up, out)  out = silu(in · gateᵀ) · (in · upᵀ) of weight =
//                                        [gate | up] (a concatenation), w = out's width; gate_up
//                                        [n, 2w]: scratch for the product where a backend does
//                                        not fuse (the cuda backend does at <= 4 packed rows)
//   SplitHeads(in, groups, parts)        in's rows are `groups` groups of [part 0 | part 1 | ...];
//                                        group g of part p goes to parts[p].out at column
//                                        parts[p].offset + g · parts[p].width
//   SigmoidMul(gate, inout)              inout *= sigmoid(gate)
//   SwiGlu(gate, up, out)                out = silu(gate) · up
//   Add(inout, delta)                    residual add
//   GatherLastRows(in, out)              the last token row of each sequence that samples
//   LinearAttend(layer, weights, acts)   a Gated DeltaNet mixer on linear layer `layer`'s
//                                        per-slot recurrent state (GdnOpActs below)
//   MoeFfn(in, weights, out)             routed experts + shared expert (MoeOpWeights below)
#pragma once

#include <cstdint>

#include "worker/models/activation_table.h"
#include "worker/models/weight_declaration.h"

namespace tessera::worker {

struct Projection {
  WeightId weight = kNoWeight;
  ActId out = 0;
};

// The q, k and v biases of an attention layer (kNoWeight: none), applied by RotaryAttendQkv.
struct QkvBiases {
  WeightId q = kNoWeight, k = kNoWeight, v = kNoWeight;
};

struct SplitPart {
  ActId out = 0;
  int64_t offset = 0;  // first column of group 0 in `out`
  int64_t width = 0;   // columns per group
};

// One Gated DeltaNet layer's own weights (the projections around it are ordinary Project calls).
struct GdnOpWeights {
  WeightId conv = kNoWeight;     // ssm_conv1d [conv channels, kernel]
  WeightId a = kNoWeight;        // ssm_a = -exp(A_log) [v_heads]
  WeightId dt_bias = kNoWeight;  // ssm_dt.bias [v_heads]
  WeightId norm = kNoWeight;     // ssm_norm [head_v_dim]
};

// The mixer's activations: inputs qkv [n, 2·key dim + value dim] (conv channels), z, beta_in,
// alpha_in (pre-activation gates, [n, v_heads]); scratch conv [n, conv channels], g and beta
// [n, v_heads] (f32); output out [n, value dim] = GatedRmsNorm(rule output, norm, z).
struct GdnOpActs {
  ActId qkv = 0, z = 0, beta_in = 0, alpha_in = 0;
  ActId conv = 0, g = 0, beta = 0;
  ActId out = 0;
};

// One MoE FFN's weights (llama.cpp names); the shared expert's are kNoWeight when absent.
struct MoeOpWeights {
  WeightId router = kNoWeight;       // ffn_gate_inp [experts, hidden]
  WeightId gate_exps = kNoWeight;    // ffn_gate_exps [experts, expert ffn, hidden]
  WeightId up_exps = kNoWeight;      // ffn_up_exps
  // ffn_gate_up_exps [experts, 2 * expert ffn, hidden]: each expert's gate rows then its up
  // rows (llama.cpp's fused form), instead of the two above.
  WeightId gate_up_exps = kNoWeight;
  WeightId down_exps = kNoWeight;    // ffn_down_exps [experts, hidden, expert ffn]
  WeightId shared_gate = kNoWeight;  // ffn_gate_shexp [shared ffn, hidden]
  WeightId shared_up = kNoWeight;    // ffn_up_shexp
  WeightId shared_down = kNoWeight;  // ffn_down_shexp [hidden, shared ffn]
  WeightId shared_expert_gate = kNoWeight;  // ffn_gate_inp_shexp [1, hidden]
};

}  // namespace tessera::worker
