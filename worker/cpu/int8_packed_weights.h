// The matmul weights of a llama-family model repacked for the int8-activation matmul
// (kernels/cpu/int8_matmul.h), built once at load when a runner is asked for
// MatmulActivations::kInt8. The int8 path reads Q8_0, Q4_0 and Q4_1 weights whose columns are a
// multiple of 32; a model with any other matmul weight (F32, F16, types dequantized at load) cannot
// run int8 activations: CheckInt8Packable says which weights, and the runner refuses (no silent
// fallback to the exact matmul for some projections).
//
// Ownership: owns one huge-page buffer (util::HugePageBuffer) holding every packed matrix; the
// views point into it. Immutable after construction; any thread may read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

#include "common/util/huge_page_buffer.h"
#include "kernels/cpu/int8_matmul.h"
#include "worker/cpu/llama_weights.h"

namespace tessera::worker {

struct Int8LayerWeights {
  kernels::cpu::Int8WeightView wq, wk, wv, wo, w_gate, w_up, w_down;
};

// The matmul weights of `weights` the int8 path cannot read, e.g. "blk.0.attn_q (F32, 64 cols)";
// empty when every projection can be packed.
std::vector<std::string> UnpackableInt8Weights(const LlamaWeights& weights);

// OK when every matmul weight can be packed; FAILED_PRECONDITION naming the others otherwise.
absl::Status CheckInt8Packable(const LlamaWeights& weights);

class Int8PackedWeights {
 public:
  // Precondition: CheckInt8Packable(weights) is OK (checked: aborts naming the weights).
  explicit Int8PackedWeights(const LlamaWeights& weights);

  const Int8LayerWeights& layer(int l) const { return layers_[l]; }
  const kernels::cpu::Int8WeightView& output() const { return output_; }
  size_t bytes() const { return memory_.size(); }
  // How many matmul weights were packed: 7 per layer + the output projection.
  int packed_count() const { return packed_count_; }

 private:
  util::HugePageBuffer memory_;
  std::vector<Int8LayerWeights> layers_;
  kernels::cpu::Int8WeightView output_;
  int packed_count_ = 0;
};

}  // namespace tessera::worker
