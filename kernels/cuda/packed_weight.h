// Packed weights on the host: the repack from the formats weights arrive in (GGUF Q8_0, Q4_0,
// Q4_1, Q4_K rows; ModelOpt NVFP4 tensors; planar codes + scales) into the planar layout of
// packed_format.h, and the exact f32 reference of what a packed weight holds.
//
// Every repack is a byte-level rearrangement: codes, scales and mins are moved, never
// re-rounded, so DequantizePacked(repacked) equals the source format's own f32 decoding bit for
// bit (for GGUF: common/gguf's DequantizeToF32, itself ggml's dequantize_row_*). Thread-safe
// pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf/ggml_type.h"
#include "common/gguf/ocp_small_floats.h"
#include "kernels/cuda/packed_format.h"

namespace tessera::cuda {

// Host copies of packed_format.h's arrays (upload each, then fill a PackedLinear with the device
// pointers).
struct PackedWeight {
  PackedScheme scheme = PackedScheme::kQ8_0;
  int n = 0;
  int k = 0;
  std::vector<uint8_t> codes;          // [n][PackedRowCodeBytes(scheme, k)]
  std::vector<uint8_t> scales;         // [n][k / G][PackedScaleBytes(scheme)]
  std::vector<uint8_t> mins;           // [n][k / G][PackedMinBytes(scheme)]; empty without mins
  std::vector<uint16_t> super_scales;  // Q4_K: [n][k / 256][2] = {d, dmin}; empty otherwise
  float tensor_scale = 1.0f;
};

// The packed scheme of a GGUF tensor type (Q8_0, Q4_0, Q4_1, Q4_K, NVFP4, MXFP4), or nullopt.
std::optional<PackedScheme> PackedSchemeOfGgufType(gguf::GgmlType type);

// n rows of k elements of a GGUF tensor of `type` (Q8_0, Q4_0, Q4_1, Q4_K, NVFP4 or MXFP4),
// `data` holding exactly its n * k / block_size blocks. INVALID_ARGUMENT for another type, a
// shape PackedShapeError rejects, a size mismatch, or a scale byte ggml decodes to a value the
// planar scale cannot hold (NVFP4 0xFF = 480, MXFP4 255 = 2^128; no quantizer writes either).
// NVFP4 / MXFP4 code 8 (-0) dequantizes to -0.0 here and +0.0 in ggml: equal values.
absl::StatusOr<PackedWeight> PackGgufRows(gguf::GgmlType type, std::span<const uint8_t> data,
                                          int n, int k);

// The arrays given directly, already planar (sizes checked against packed_format.h's table;
// `mins` / `super_scales` empty where the scheme has none). For tests and synthetic weights; an
// NVFP4 `codes` [n][k/2] in ModelOpt's order is already planar.
absl::StatusOr<PackedWeight> PackPlanar(PackedScheme scheme, int n, int k,
                                        std::span<const uint8_t> codes,
                                        std::span<const uint8_t> scales,
                                        std::span<const uint8_t> mins = {},
                                        std::span<const uint16_t> super_scales = {},
                                        float tensor_scale = 1.0f);

// Every weight in f32, [n][k] row-major, each exactly packed_format.h's formula.
std::vector<float> DequantizePacked(const PackedWeight& weight);

// The small float formats, exactly (NaN for the NaN encodings): common/gguf/ocp_small_floats.h.
using gguf::ocp::E2M1ToFloat;
using gguf::ocp::E4M3ToFloat;
using gguf::ocp::E8M0ToFloat;

}  // namespace tessera::cuda
