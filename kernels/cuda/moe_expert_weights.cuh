// How the grouped MoE GEMM (moe_grouped_gemm.cuh) reads an expert's weights: a dense stack of T
// (the GGUF expert layout, dequantized at load) or a packed one (packed_format.h, the experts'
// rows one after another, so expert e's row r is row e · expert_rows + first_row + r of one
// packed matrix), decoded element by element into the kernel's f32 weight tile. A packed stack
// also carries the scale its products are multiplied by: one per expert (NVFP4's per-expert
// tensor scales, the GGUF `.scale` [experts]) or the stack's tensor_scale (1 for the GGUF block
// formats).
//
// Host code picks the form (ExpertStack); the kernel sees a source type with
//   float Load(expert, row, col)   the weight in f32 (packed: packed_format.h's formula exactly)
//   float OutputScale(expert)      what the expert's products are multiplied by (kScaled only)
#pragma once

#include <cstdint>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/packed_decode.cuh"
#include "kernels/cuda/packed_format.h"

namespace tessera::cuda {

// A packed expert stack, or a view of part of each expert's matrix (the gate or up half of a
// fused gate_up stack: expert_rows = 2 · ffn, first_row 0 or ffn).
struct PackedExperts {
  PackedLinear stack;     // n = experts · expert_rows
  int expert_rows = 0;    // rows from one expert's matrix to the next's
  int first_row = 0;      // the view's first row within each expert's matrix
  const float* expert_scales = nullptr;  // [experts] device f32; null: stack.tensor_scale
};

// The weights of one grouped projection, dense or packed.
template <typename T>
struct ExpertStack {
  const T* dense = nullptr;  // [E, expert_rows, cols] of T, at the view's first row
  int expert_rows = 0;       // dense: rows from one expert's matrix to the next's (0: rows_out)
  bool packed = false;       // true: read packed_view instead
  PackedExperts packed_view = {};
};

namespace moe_weights {

template <typename T>
struct DenseSource {
  static constexpr bool kScaled = false;
  const T* w;
  int cols;
  int expert_rows;
  __device__ __forceinline__ float Load(int expert, int row, int col) const {
    return ToFloat(w[(int64_t{expert} * expert_rows + row) * cols + col]);
  }
  __device__ __forceinline__ float OutputScale(int) const { return 1.0f; }
};

template <PackedScheme kScheme>
struct PackedSource {
  static constexpr bool kScaled = true;
  PackedExperts v;
  __device__ __forceinline__ float Load(int expert, int row, int col) const {
    return packed_detail::PackedWeightValue<kScheme>(v.stack, expert * v.expert_rows + v.first_row + row,
                                                     col);
  }
  __device__ __forceinline__ float OutputScale(int expert) const {
    return v.expert_scales != nullptr ? __ldg(&v.expert_scales[expert]) : v.stack.tensor_scale;
  }
};

}  // namespace moe_weights

// Why `w` cannot serve a projection of rows_out x cols over num_experts experts, or null.
template <typename T>
TESSERA_PACKED_HOST_DEVICE inline const char* ExpertStackError(const ExpertStack<T>& w,
                                                               int num_experts, int rows_out,
                                                               int cols) {
  if (!w.packed) return w.dense == nullptr ? "no weights" : nullptr;
  const PackedExperts& p = w.packed_view;
  if (PackedShapeError(p.stack.scheme, p.stack.n, p.stack.k) != nullptr) return "packed shape";
  if (p.stack.k != cols || p.stack.n != num_experts * p.expert_rows ||
      p.first_row < 0 || p.first_row + rows_out > p.expert_rows) {
    return "packed stack does not match the projection";
  }
  return nullptr;
}

}  // namespace tessera::cuda
