// Elementwise kernels of the CUDA model runner (T = bf16, f16 or f32; f32 arithmetic, one
// rounding to T per output):
//   LaunchAddInPlace   inout[i] += delta[i]                  i < count (residual adds)
//   LaunchAddBias      inout[r, c] += bias[c]                [rows, width] row-major (qkv/o bias)
//   LaunchGatherRows   dst[r, :] = src[row_indices[r], :]    bit copy (last-token hidden rows
//                                                            before the LM head)
//   LaunchCopyColumnGroups  dst[r·dst_row + g·dst_group + j] = src[r·src_row + g·src_group + j]
//                      j < width, g < groups, r < rows: bit copy of one part of a row made of
//                      `groups` groups of parts (the model ops' SplitHeads, one launch per part)
//   LaunchSigmoidMul   inout[i] *= 1 / (1 + expf(-gate[i]))  (gated attention's output gate; the
//                      cpu backend's expression, f32, one rounding to T)
// AddInPlace, AddBias and GatherRows are grid-stride loops over 16-byte vectors (vector_access.cuh: 8 halves or 4
// floats) when its pointers are 16-byte aligned (and, for AddBias/GatherRows, the row is a whole
// number of vectors), else over single elements; AddInPlace finishes an odd tail element-wise.
// Preconditions: no overlap between inout and delta/bias, or between src and dst; row_indices
// in [0, rows of src); count, rows, width >= 0 (0 launches nothing useful but is valid).
// Grid: ceil(units / kElementwiseThreads) blocks, at most kElementwiseMaxBlocks (the loop
// strides over the rest).
// Bound (H100): memory; bytes moved ÷ 3.35 TB/s (AddInPlace of 512 x 4096 bf16: 4 MiB read +
// 4 MiB read + 4 MiB written, ~4 µs); decode-sized calls are launch-latency bound. Accesses are
// 16-byte vectors, consecutive threads on consecutive addresses (coalesced).
#pragma once

#include <cstdint>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch_shape.h"
#include "kernels/cuda/vector_access.cuh"

namespace tessera::cuda {

inline constexpr int kElementwiseThreads = 256;
inline constexpr int kElementwiseMaxBlocks = 4 * 132;  // 4 per H100 SM; the loop strides on

namespace elementwise_detail {

__device__ __forceinline__ int64_t GlobalThread() {
  return int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t GridThreads() { return int64_t{gridDim.x} * blockDim.x; }

// a[0 .. kVec16<T>) += b[0 .. kVec16<T>) on 16-byte vectors.
template <typename T>
__device__ __forceinline__ void AddVector(T* a, const T* b) {
  float x[kVec16<T>], y[kVec16<T>];
  Load16(a, x);
  Load16(b, y);
  for (int i = 0; i < kVec16<T>; ++i) x[i] += y[i];
  Store16(a, x);
}

template <typename T>
__device__ __forceinline__ void AddScalar(T* a, const T* b) {
  *a = FromFloat<T>(ToFloat(*a) + ToFloat(*b));
}

}  // namespace elementwise_detail

template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    AddInPlaceKernel(T* __restrict__ inout, const T* __restrict__ delta, int64_t count) {
  using namespace elementwise_detail;
  constexpr int kVec = kVec16<T>;
  const bool vectorized = Aligned16(inout) && Aligned16(delta);
  const int64_t vectors = vectorized ? count / kVec : 0;
  for (int64_t v = GlobalThread(); v < vectors; v += GridThreads()) {
    AddVector(inout + v * kVec, delta + v * kVec);
  }
  for (int64_t i = vectors * kVec + GlobalThread(); i < count; i += GridThreads()) {
    AddScalar(inout + i, delta + i);
  }
}

template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    AddBiasKernel(T* __restrict__ inout, const T* __restrict__ bias, int rows, int width) {
  using namespace elementwise_detail;
  constexpr int kVec = kVec16<T>;
  const int64_t total = int64_t{rows} * width;
  if (width % kVec == 0 && Aligned16(inout) && Aligned16(bias)) {
    const int row_vectors = width / kVec;
    for (int64_t v = GlobalThread(); v < total / kVec; v += GridThreads()) {
      AddVector(inout + v * kVec, bias + (v % row_vectors) * kVec);
    }
    return;
  }
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    AddScalar(inout + i, bias + i % width);
  }
}

// Copies `units` of Unit per row: dst row r <- src row row_indices[r].
template <typename Unit>
__device__ __forceinline__ void GatherUnits(const Unit* __restrict__ src,
                                            const int32_t* __restrict__ row_indices,
                                            Unit* __restrict__ dst, int num_rows, int units) {
  using namespace elementwise_detail;
  const int64_t total = int64_t{num_rows} * units;
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t row = i / units, column = i % units;
    dst[i] = src[int64_t{__ldg(&row_indices[row])} * units + column];
  }
}

template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    GatherRowsKernel(const T* __restrict__ src, const int32_t* __restrict__ row_indices,
                     T* __restrict__ dst, int num_rows, int width) {
  if ((int64_t{width} * sizeof(T)) % 16 == 0 && Aligned16(src) && Aligned16(dst)) {
    const int units = int(int64_t{width} * sizeof(T) / 16);
    GatherUnits(reinterpret_cast<const uint4*>(src), row_indices, reinterpret_cast<uint4*>(dst),
                num_rows, units);
  } else {
    GatherUnits(src, row_indices, dst, num_rows, width);
  }
}

// One element per iteration (the column groups are narrow and at any offset: no vectors).
template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    CopyColumnGroupsKernel(const T* __restrict__ src, int64_t src_row, int64_t src_group,
                           T* __restrict__ dst, int64_t dst_row, int64_t dst_group, int rows,
                           int groups, int width) {
  using namespace elementwise_detail;
  const int64_t total = int64_t{rows} * groups * width;
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t j = i % width;
    const int64_t g = (i / width) % groups;
    const int64_t r = i / (int64_t{width} * groups);
    dst[r * dst_row + g * dst_group + j] = src[r * src_row + g * src_group + j];
  }
}

template <typename T>
__global__ void __launch_bounds__(kElementwiseThreads)
    SigmoidMulKernel(const T* __restrict__ gate, T* __restrict__ inout, int64_t count) {
  using namespace elementwise_detail;
  for (int64_t i = GlobalThread(); i < count; i += GridThreads()) {
    const float sigmoid = 1.0f / (1.0f + expf(-ToFloat(gate[i])));
    inout[i] = FromFloat<T>(ToFloat(inout[i]) * sigmoid);
  }
}

// Blocks for `units` work items of a grid-stride loop (at least 1).
inline LaunchShape ElementwiseShape(int64_t units) {
  int64_t blocks = (units + kElementwiseThreads - 1) / kElementwiseThreads;
  blocks = blocks < 1 ? 1 : (blocks > kElementwiseMaxBlocks ? kElementwiseMaxBlocks : blocks);
  return LaunchShape{dim3(unsigned(blocks)), dim3(kElementwiseThreads), 0};
}

template <class Launcher, typename T>
auto LaunchAddInPlace(Launcher& launcher, T* inout, const T* delta, int64_t count) {
  return launcher.Launch(ElementwiseShape(count / kVec16<T> + 1), AddInPlaceKernel<T>,
                         inout, delta, count);
}

template <class Launcher, typename T>
auto LaunchAddBias(Launcher& launcher, T* inout, const T* bias, int rows, int width) {
  return launcher.Launch(ElementwiseShape(int64_t{rows} * width / kVec16<T> + 1),
                         AddBiasKernel<T>, inout, bias, rows, width);
}

template <class Launcher, typename T>
auto LaunchGatherRows(Launcher& launcher, const T* src, const int32_t* row_indices, T* dst,
                      int num_rows, int width) {
  return launcher.Launch(ElementwiseShape(int64_t{num_rows} * width / kVec16<T> + 1),
                         GatherRowsKernel<T>, src, row_indices, dst, num_rows, width);
}

// Preconditions: rows, groups, width >= 0; src and dst do not overlap; strides such that every
// index stays inside its buffer.
template <class Launcher, typename T>
auto LaunchCopyColumnGroups(Launcher& launcher, const T* src, int64_t src_row, int64_t src_group,
                            T* dst, int64_t dst_row, int64_t dst_group, int rows, int groups,
                            int width) {
  return launcher.Launch(ElementwiseShape(int64_t{rows} * groups * width),
                         CopyColumnGroupsKernel<T>, src, src_row, src_group, dst, dst_row,
                         dst_group, rows, groups, width);
}

// Preconditions: count >= 0; gate and inout do not overlap.
template <class Launcher, typename T>
auto LaunchSigmoidMul(Launcher& launcher, const T* gate, T* inout, int64_t count) {
  return launcher.Launch(ElementwiseShape(count), SigmoidMulKernel<T>, gate, inout, count);
}

}  // namespace tessera::cuda
