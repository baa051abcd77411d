// The matmul weights of a llama-family model repacked for the int8-activation matmul
// (kernels/cpu/int8_matmul.h), built once at load when a runner is asked for
// MatmulActivations::kInt8. Weights in a format that path cannot read (F32, or types dequantized
// at load) have a null view and keep using the exact f32 matmul.
//
// Ownership: owns one buffer (2 MiB aligned, advised MADV_HUGEPAGE, like the weight copy in
// util::MappedFile) holding every packed matrix; the views point into it. Immutable after
// construction; any thread may read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/int8_matmul.h"
#include "worker/cpu/llama_weights.h"

namespace tessera::worker {

struct Int8LayerWeights {
  kernels::cpu::Int8WeightView wq, wk, wv, wo, w_gate, w_up, w_down;
};

class Int8PackedWeights {
 public:
  explicit Int8PackedWeights(const LlamaWeights& weights);
  ~Int8PackedWeights();
  Int8PackedWeights(const Int8PackedWeights&) = delete;
  Int8PackedWeights& operator=(const Int8PackedWeights&) = delete;

  const Int8LayerWeights& layer(int l) const { return layers_[l]; }
  const kernels::cpu::Int8WeightView& output() const { return output_; }
  size_t bytes() const { return bytes_; }

 private:
  uint8_t* memory_ = nullptr;
  size_t bytes_ = 0;
  std::vector<Int8LayerWeights> layers_;
  kernels::cpu::Int8WeightView output_;
};

}  // namespace tessera::worker
