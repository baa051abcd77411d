// The matmul weights of a llama-family model repacked for the int8-activation matmul
// (kernels/cpu/int8_matmul.h), built once at load when a runner is asked for
// MatmulActivations::kInt8. Weights in a format that path cannot read (F32, or types dequantized
// at load) have a null view and keep using the exact f32 matmul.
//
// Ownership: owns one huge-page buffer (util::HugePageBuffer) holding every packed matrix; the
// views point into it. Immutable after construction; any thread may read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/util/huge_page_buffer.h"
#include "kernels/cpu/int8_matmul.h"
#include "worker/cpu/llama_weights.h"

namespace tessera::worker {

struct Int8LayerWeights {
  kernels::cpu::Int8WeightView wq, wk, wv, wo, w_gate, w_up, w_down;
};

class Int8PackedWeights {
 public:
  explicit Int8PackedWeights(const LlamaWeights& weights);

  const Int8LayerWeights& layer(int l) const { return layers_[l]; }
  const kernels::cpu::Int8WeightView& output() const { return output_; }
  size_t bytes() const { return memory_.size(); }

 private:
  util::HugePageBuffer memory_;
  std::vector<Int8LayerWeights> layers_;
  kernels::cpu::Int8WeightView output_;
};

}  // namespace tessera::worker
