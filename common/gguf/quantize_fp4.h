// Encoders for ggml's 4-bit float formats (docs/design/fp4-formats.md), for quantizer tools and
// test models. Pure functions; thread-safe.
//
// MXFP4 follows ggml's reference quantizer (quantize_row_mxfp4_ref) and gives its bytes.
//
// NVFP4 follows the two-level recipe of NVIDIA's checkpoints (a per-tensor f32 scale and a UE4M3
// scale per 16 elements), which is what llama.cpp's converter stores: the blocks hold the tensor
// divided by the tensor scale, and the tensor scale goes into the GGUF as a separate F32 tensor
// `<name without .weight>.scale` that multiplies the matmul output. For a tensor with values x:
//   s        = amax(|x|) / (6 * 448)                      (the tensor scale; 1 if x is all zero)
//   scale[b] = E4M3(amax(|x in sub-block b|) / 6 / s)     (round to nearest even, at most 448)
//   code[i]  = E2M1(x[i] / (scale[b] * s))                (round to nearest even, at most 6)
// so that DequantizeToF32(kNvfp4, blocks)[i] * s approximates x[i]. ggml's own
// quantize_row_nvfp4_ref is the same with s = 1 and slightly different rounding (the doc lists
// the differences); its decoder reads these bytes unchanged.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::gguf {

inline constexpr int kMxfp4BlockElements = 32;
inline constexpr int kMxfp4BlockBytes = 17;
inline constexpr int kNvfp4BlockElements = 64;
inline constexpr int kNvfp4BlockBytes = 36;

// One MXFP4 block of 32 values, byte for byte what ggml's quantize_row_mxfp4_ref writes (where
// ggml's result is defined: for a block maximum below 2^-125, where ggml converts a negative float
// to uint8_t, the scale byte is 0 here).
void QuantizeMxfp4Block(std::span<const float, kMxfp4BlockElements> x,
                        std::span<uint8_t, kMxfp4BlockBytes> block);

// The NVFP4 tensor scale of `x`: max |x| / (6 * 448), or 1 when every value is zero.
// Precondition: the values are finite.
float Nvfp4TensorScale(std::span<const float> x);

// One NVFP4 block of 64 values quantized against `tensor_scale` (> 0), as in the recipe above.
void QuantizeNvfp4Block(std::span<const float, kNvfp4BlockElements> x, float tensor_scale,
                        std::span<uint8_t, kNvfp4BlockBytes> block);

// A whole tensor in NVFP4: the blocks and the f32 tensor scale to store beside them.
struct Nvfp4Tensor {
  std::vector<uint8_t> blocks;
  float tensor_scale = 1.0f;
};

// INVALID_ARGUMENT unless x.size() is a multiple of 64. Precondition: the values are finite.
absl::StatusOr<Nvfp4Tensor> QuantizeNvfp4Tensor(std::span<const float> x);

}  // namespace tessera::gguf
