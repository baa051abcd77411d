// GGUF weight tensor -> bf16 at load time, on the device: the raw GGUF bytes of a [rows, cols]
// tensor (uploaded as they are in the file) become a dense row-major [rows, cols] bf16 matrix.
// Formats: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K (layouts in gguf_blocks.cuh).
// Each value is decoded to f32 exactly as common/gguf's CPU decoder does (bit-identical, see
// gguf_blocks.cuh) and rounded once to bf16 (round to nearest even).
//
// Design: the tensor's blocks are contiguous regardless of rows (each row is cols / block
// elements whole blocks), so the kernel works on the flat array of rows * cols elements; one
// thread decodes 8 consecutive elements (never straddling a block or a sub-block, so one scale
// load per thread) and writes them as one 16-byte store.
// Bound (H100): memory; reads the encoded bytes once (0.56-4 bytes per element) and writes 2
// bytes per element: a 4096 x 4096 Q4_K tensor (9.4 MB in, 33.6 MB out) is ~13 µs at
// 3.35 TB/s. Stores are 16-byte and fully coalesced across a warp (512 contiguous bytes); the
// loads of a warp cover contiguous blocks (whole 32-byte sectors, reused across lanes via L1),
// one scale per thread. Runs once per tensor at load, so it only needs to be memory-bound.
#pragma once

#include <cstdint>

#include "kernels/cuda/gguf_blocks.cuh"
#include "kernels/cuda/launch_shape.h"

namespace tessera::cuda {

inline constexpr int kDequantizeThreads = 256;

// src: the tensor's GGUF bytes [rows * GgufRowBytes(format, cols)], dst: [rows, cols] bf16.
template <GgufFormat kFormat>
__global__ void __launch_bounds__(kDequantizeThreads)
    DequantizeToBf16Kernel(const uint8_t* __restrict__ src, __nv_bfloat16* __restrict__ dst,
                           int64_t num_elements) {
  const int64_t first =
      (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kGroupElements;
  if (first >= num_elements) return;
  const int64_t left = num_elements - first;
  const int count = left < kGroupElements ? static_cast<int>(left) : kGroupElements;
  float v[kGroupElements];
  DecodeGroup<kFormat>(src, first, count, v);
  StoreGroup(dst + first, v, count);
}

// One format, chosen at compile time.
// Preconditions: rows > 0, cols > 0, cols % BlockElements(kFormat) == 0 (GGUF guarantees it),
// rows * cols / 8 blocks of 256 threads fit in a grid (< 2^31 blocks); src holds the whole
// tensor; dst does not overlap src. Any alignment (16-byte stores when dst is 16-byte aligned).
template <class Launcher, GgufFormat kFormat>
auto LaunchDequantizeToBf16(Launcher& launcher, const uint8_t* src, __nv_bfloat16* dst,
                            int64_t rows, int64_t cols) {
  const int64_t num_elements = rows * cols;
  const int64_t per_block = int64_t{kDequantizeThreads} * kGroupElements;
  const LaunchShape shape{dim3(static_cast<unsigned>((num_elements + per_block - 1) / per_block)),
                          dim3(kDequantizeThreads), 0};
  return launcher.Launch(shape, DequantizeToBf16Kernel<kFormat>, src, dst, num_elements);
}

// The format chosen at run time (e.g. from the GGUF tensor's type). Same preconditions; a value
// outside the enum launches an empty grid, which every launcher rejects as a bad configuration.
template <class Launcher>
auto LaunchDequantizeToBf16(Launcher& launcher, GgufFormat format, const uint8_t* src,
                            __nv_bfloat16* dst, int64_t rows, int64_t cols) {
  switch (format) {
    case GgufFormat::kF32:
      return LaunchDequantizeToBf16<Launcher, GgufFormat::kF32>(launcher, src, dst, rows, cols);
    case GgufFormat::kF16:
      return LaunchDequantizeToBf16<Launcher, GgufFormat::kF16>(launcher, src, dst, rows, cols);
    case GgufFormat::kBF16:
      return LaunchDequantizeToBf16<Launcher, GgufFormat::kBF16>(launcher, src, dst, rows, cols);
    case GgufFormat::kQ8_0:
      return LaunchDequantizeToBf16<Launcher, GgufFormat::kQ8_0>(launcher, src, dst, rows, cols);
    case GgufFormat::kQ4_0:
      return LaunchDequantizeToBf16<Launcher, GgufFormat::kQ4_0>(launcher, src, dst, rows, cols);
    case GgufFormat::kQ4_1:
      return LaunchDequantizeToBf16<Launcher, GgufFormat::kQ4_1>(launcher, src, dst, rows, cols);
    case GgufFormat::kQ4_K:
      return LaunchDequantizeToBf16<Launcher, GgufFormat::kQ4_K>(launcher, src, dst, rows, cols);
    case GgufFormat::kQ6_K:
      return LaunchDequantizeToBf16<Launcher, GgufFormat::kQ6_K>(launcher, src, dst, rows, cols);
  }
  return launcher.Launch(LaunchShape{dim3(0), dim3(kDequantizeThreads), 0},
                         DequantizeToBf16Kernel<GgufFormat::kF32>, src, dst, int64_t{0});
}

}  // namespace tessera::cuda
