// A model's tensors in host memory as the CPU kernels read them, bound from its
// WeightDeclaration (worker/models/weight_declaration.h) and indexed by WeightId. Every backend
// starts from them: the cpu runner computes on them, the cuda runner uploads them
// (worker/cuda/device_model_weights.h), tensor parallelism cuts its shards from them
// (worker/parallel/weight_sharding.h).
//
// Matmul weights (kMatrix, kExperts) in a format the kernels read directly (F32, Q8_0, Q4_0,
// Q4_1, MXFP4, NVFP4) stay in the loaded GGUF — kernels/cpu/matmul.h shows that is bit-identical
// to dequantizing them and faster (docs/perf/cpu-kernels.md); every other type (F16, BF16,
// K-quants, ...) is dequantized to f32 once at load into buffers owned here. kDense tensors are
// f32 (views into the file when stored as F32).
//
// An NVFP4 matrix may come with a per-tensor scale, the F32 tensor `<name less .weight>.scale`
// (docs/design/fp4-formats.md) that multiplies its matmul output: it is part of the weight
// (tensor_scale), applied by each backend's Project, so no model definition names it; an expert
// stack's `.scale` holds one per expert (expert_scales), applied by each backend's MoE layer. A
// scale beside an embedding table is refused (UNIMPLEMENTED): the lookup does not apply it.
//
// Ownership: views point into the GgufFile (which must outlive this) or into `owned`.
// Immutable after load; any thread may read.
#pragma once

#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"
#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/moe_ffn.h"
#include "kernels/cpu/weight_format.h"
#include "worker/models/weight_declaration.h"

namespace tessera::worker {

struct HostWeight {
  WeightRole role = WeightRole::kDense;
  bool present = false;                     // false: an optional tensor the file lacks
  kernels::cpu::WeightView matrix;          // kMatrix, kEmbedding
  kernels::cpu::ExpertWeightsView experts;  // kExperts
  std::span<const float> values;            // kDense, [spec.elements()]
  float tensor_scale = 1.0f;  // kMatrix: multiplies the matmul output (an NVFP4 sidecar), else 1
  std::vector<float> expert_scales;  // kExperts: [experts], expert e's outputs × [e]; empty: 1
  // kMatrix: this rank's share of a row-parallel projection (worker/parallel/weight_sharding.h):
  // its output is a partial sum, which Project completes over the tensor-parallel ranks.
  bool partial_sum = false;
};

struct HostModelWeights {
  std::vector<HostWeight> tensors;  // [declaration.size()], by WeightId
  int64_t num_dequantized_bytes = 0;                      // f32 copies made at load
  std::deque<kernels::cpu::AlignedVector<float>> owned;  // backing store for those copies

  const HostWeight& operator[](WeightId id) const { return tensors.at(static_cast<size_t>(id)); }
};

// Binds every declared tensor. INVALID_ARGUMENT naming the tensor when a required one is missing
// ("model has no tensor 'blk.0.attn_q.weight'"), has another shape, cannot be dequantized, or
// (spec.positive) holds a value that is not finite and positive, or an NVFP4 tensor scale that is
// not one finite positive F32 per matrix (per expert for a stack); UNIMPLEMENTED naming an NVFP4
// embedding table's scale.
absl::StatusOr<std::unique_ptr<HostModelWeights>> BindHostWeights(
    const gguf::GgufFile& file, const WeightDeclaration& declaration);

}  // namespace tessera::worker
