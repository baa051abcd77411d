// Conversion between GGML tensor encodings and f32, exactly as the formats define them.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/gguf/ggml_type.h"
#include "common/util/half.h"

namespace tessera::gguf {

// True for types DequantizeToF32 handles.
bool CanDequantize(GgmlType type);

// Decodes `num_elements` values (a multiple of the type's block size) from `src` into `dst`.
// INVALID_ARGUMENT if sizes disagree; UNIMPLEMENTED for types without a decoder.
// `src` must hold exactly the bytes of `num_elements` values; `dst` at least `num_elements` floats.
// Results are bit-identical to ggml's dequantize_row_* (same float operations in the same order).
absl::Status DequantizeToF32(GgmlType type, std::span<const uint8_t> src, uint64_t num_elements,
                             std::span<float> dst);
absl::StatusOr<std::vector<float>> DequantizeToF32(GgmlType type, std::span<const uint8_t> src,
                                                   uint64_t num_elements);

// Reference encoders (round-to-nearest, as ggml's reference quantizers) used to build test models.
// `src.size()` must be a multiple of the block size. UNIMPLEMENTED for unsupported types.
// NVFP4 is encoded with tensor scale 1 (the blocks alone decode to the values); for the two-level
// form with a per-tensor scale use QuantizeNvfp4Tensor (quantize_fp4.h).
absl::StatusOr<std::vector<uint8_t>> QuantizeFromF32(GgmlType type, std::span<const float> src);

// IEEE half / bfloat16 conversions (common/util/half.h).
using util::Bf16ToFloat;
using util::FloatToBf16;
using util::FloatToHalf;
using util::HalfToFloat;

}  // namespace tessera::gguf
