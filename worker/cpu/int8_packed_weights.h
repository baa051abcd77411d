// A model's matmul weights repacked for the int8-activation matmul (kernels/cpu/int8_matmul.h),
// built once at load when a runner is asked for MatmulActivations::kInt8. The int8 path reads
// Q8_0, Q4_0 and Q4_1 projections whose columns are a multiple of 32; a model with any other
// matmul weight (F32, F16, types dequantized at load, expert stacks: the int8 mode has no MoE
// path) cannot run int8 activations: CheckInt8Packable says which weights, and the runner refuses
// (no silent fallback to the exact matmul for some projections).
//
// Ownership: owns one huge-page buffer (util::HugePageBuffer) holding every packed matrix; the
// views point into it. Immutable after construction; any thread may read.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/util/huge_page_buffer.h"
#include "kernels/cpu/int8_matmul.h"
#include "worker/models/host_model_weights.h"
#include "worker/models/weight_declaration.h"

namespace tessera::worker {

// The matmul weights the int8 path cannot read, e.g. "blk.0.attn_q.weight (F32, 64 cols)"; empty
// when every projection can be packed.
std::vector<std::string> UnpackableInt8Weights(const WeightDeclaration& declaration,
                                               const HostModelWeights& weights);

// OK when every matmul weight can be packed; FAILED_PRECONDITION naming the others otherwise.
absl::Status CheckInt8Packable(const WeightDeclaration& declaration,
                               const HostModelWeights& weights);

class Int8PackedWeights {
 public:
  // Precondition: CheckInt8Packable is OK (checked: aborts naming the weights).
  Int8PackedWeights(const WeightDeclaration& declaration, const HostModelWeights& weights);

  // The packed view of a kMatrix weight (null data for other roles and absent weights).
  const kernels::cpu::Int8WeightView& operator[](WeightId id) const {
    return packed_.at(static_cast<size_t>(id));
  }
  size_t bytes() const { return memory_.size(); }
  // How many matmul weights were packed (a tied head counts once).
  int packed_count() const { return packed_count_; }

 private:
  util::HugePageBuffer memory_;
  std::vector<kernels::cpu::Int8WeightView> packed_;  // by WeightId
  int packed_count_ = 0;
};

}  // namespace tessera::worker
