// A packed weight (packed_format.h) dequantized to a dense [n, k] matrix of T (bf16 or f16) on
// the device: how the cuda runner multiplies a packed weight by many rows (m > 8, prefill and
// large decode batches) through the dense GEMM until the packed tensor-core path is faster
// (docs/design/quantized-weights.md), into a scratch matrix reused by every such GEMM.
//
// Each weight is packed_format.h's f32 formula exactly (scale·c + min with one rounding, the
// NVFP4 tensor scale applied to each weight with one rounding: packed_decode.cuh's terms), then
// rounded once to T: bit for bit DequantizePacked (packed_weight.h) rounded to T.
//
// One thread per 32-bit word of codes (8 weights of a 4-bit scheme, 4 of Q8_0), consecutive
// threads on consecutive words of a row: 4-byte loads and 16-byte (8-byte for Q8_0) stores, all
// coalesced. Bound: memory; the packed bytes read once and 2 bytes written per weight, about 2.6
// bytes moved per weight at 4 bits: ~11 µs for 4096 × 4096 at 4 TB/s (design target 80% of the
// copy bandwidth; not measured yet).
#pragma once

#include <cstdint>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch_shape.h"
#include "kernels/cuda/packed_decode.cuh"
#include "kernels/cuda/packed_format.h"

namespace tessera::cuda {

inline constexpr int kPackedDequantizeThreads = 256;

template <typename T, PackedScheme kScheme>
__global__ void __launch_bounds__(kPackedDequantizeThreads)
    PackedDequantizeKernel(PackedLinear w, T* __restrict__ out) {
  constexpr int kCodesPerWord = 32 / PackedCodeBits(kScheme);
  const int64_t words_per_row = w.k / kCodesPerWord;
  const int64_t word = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (word >= words_per_row * w.n) return;
  const int row = static_cast<int>(word / words_per_row);
  const int first = static_cast<int>(word % words_per_row) * kCodesPerWord;
  const unsigned codes = __ldg(reinterpret_cast<const unsigned*>(w.codes) + word);
  const packed_detail::GroupScale scale = packed_detail::DecodeGroupScale<kScheme>(
      packed_detail::LoadRawGroupScale<kScheme>(w, row, first / PackedGroupSize(kScheme)));
  uint32_t pairs[kCodesPerWord / 2];
  TESSERA_UNROLL
  for (int i = 0; i < kCodesPerWord; i += 2) {
    float v[2];
    TESSERA_UNROLL
    for (int h = 0; h < 2; ++h) {
      const float c =
          packed_detail::CodeValue<kScheme>(packed_detail::CodeOfWord<kScheme>(codes, i + h));
      // Without mins, the product alone (as the reference: code 8 of E2M1 stays -0).
      v[h] = PackedHasMins(kScheme) ? __fmaf_rn(scale.scale, c, scale.min)
                                    : __fmul_rn(scale.scale, c);
      if constexpr (kScheme == PackedScheme::kNvfp4) v[h] = __fmul_rn(v[h], w.tensor_scale);
    }
    pairs[i / 2] = packed_detail::PackPair<T>(v[0], v[1]);
  }
  T* to = out + int64_t{row} * w.k + first;
  if constexpr (kCodesPerWord == 8) {
    *reinterpret_cast<uint4*>(to) = make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
  } else {
    *reinterpret_cast<uint2*>(to) = make_uint2(pairs[0], pairs[1]);
  }
}

// out [w.n, w.k] = w's weights as T. Preconditions: PackedShapeError null, out 16-byte aligned
// and holding n·k elements, w's arrays as packed_format.h describes (else the launcher's
// invalid-configuration error for a bad shape or scheme, an empty grid).
template <class Launcher, typename T>
auto LaunchPackedDequantize(Launcher& launcher, const PackedLinear& w, T* out) {
  const bool valid = PackedShapeError(w.scheme, w.n, w.k) == nullptr && out != nullptr &&
                     reinterpret_cast<uintptr_t>(out) % 16 == 0 && w.codes != nullptr &&
                     w.scales != nullptr;
  const int64_t words = valid ? int64_t{w.n} * w.k * PackedCodeBits(w.scheme) / 32 : 0;
  const LaunchShape shape{dim3(CeilDiv(static_cast<unsigned>(words), kPackedDequantizeThreads)),
                          dim3(kPackedDequantizeThreads), 0};
  switch (w.scheme) {
#define TESSERA_PACKED_DEQUANTIZE_CASE(S) \
  case PackedScheme::S:                   \
    return launcher.Launch(shape, PackedDequantizeKernel<T, PackedScheme::S>, w, out);
    TESSERA_PACKED_DEQUANTIZE_CASE(kQ8_0)
    TESSERA_PACKED_DEQUANTIZE_CASE(kQ4_0)
    TESSERA_PACKED_DEQUANTIZE_CASE(kQ4_1)
    TESSERA_PACKED_DEQUANTIZE_CASE(kQ4_K)
    TESSERA_PACKED_DEQUANTIZE_CASE(kNvfp4)
    TESSERA_PACKED_DEQUANTIZE_CASE(kMxfp4)
#undef TESSERA_PACKED_DEQUANTIZE_CASE
  }
  return launcher.Launch(LaunchShape{dim3(0), dim3(kPackedDequantizeThreads), 0},
                         PackedDequantizeKernel<T, PackedScheme::kQ8_0>, w, out);
}

}  // namespace tessera::cuda
