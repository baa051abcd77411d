// The packed weight layout the packed-linear kernels read (packed_linear.cuh): a weight W of N
// output rows and K inputs kept in its quantized codes plus per-group scales, "planar" (codes
// and each kind of scale in their own row-major arrays) so a warp reads a row's codes with
// coalesced 16-byte loads. Plain C++, shared by the host repack (packed_weight.h) and the
// device code; little-endian throughout.
//
// codes      4-bit schemes: uint8 [N][K/2]; byte i of a row holds element 2i in its low nibble
//            and element 2i + 1 in its high nibble (NVIDIA ModelOpt's NVFP4 order).
//            8-bit (Q8_0): int8 [N][K].
// groups     G consecutive inputs of one row share a scale: group g of row n covers elements
//            [g G, (g + 1) G); per-group arrays are [N][K/G], row-major.
//
// scheme  G   scales [N][K/G]  mins [N][K/G]   super_scales       w (in f32)
// kQ8_0   32  f16 d            —               —                  d·q (q int8)
// kQ4_0   32  f16 d            —               —                  d·(q − 8)
// kQ4_1   32  f16 d            f16 m           —                  d·q + m
// kQ4_K   32  u8 sc (6 bits)   u8 mn (6 bits)  f16 {d, dmin}      (d·sc)·q − (dmin·mn)
//                                              [N][K/256]
// kNvfp4  16  u8 E4M3 s        —               —                  e2m1(q)·e4m3(s)·tensor_scale
// kMxfp4  32  u8 E8M0 e        —               —                  e2m1(q)·2^(e − 127)
//
// The f32 formulas are exact as written, one rounding per operation in the order shown, as
// ggml's dequantize_row_* (Q4_1: d·q exact, one rounding in + m; Q4_K: d·sc, d·sc·q and dmin·mn
// exact, one rounding in the subtraction; NVFP4: e2m1·e4m3 exact, one rounding by
// tensor_scale). E2M1 (1 sign, 2 exponent, 1 mantissa bit, bias 1): ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}.
// E4M3 (bias 7, no infinities): 0x7F and 0xFF are NaN, 448 the largest, 2^-9 the smallest
// subnormal. E8M0: 2^(e − 127), 0xFF is NaN. NVFP4's tensor_scale is ModelOpt's weight_scale_2;
// the kernels apply it to each output (not to each weight), 1 for the other schemes.
#pragma once

#include <cstdint>

// The helpers below are also called from device code (nvcc needs them marked).
#if defined(__CUDACC__)
#define TESSERA_PACKED_HOST_DEVICE __host__ __device__
#else
#define TESSERA_PACKED_HOST_DEVICE
#endif

namespace tessera::cuda {

enum class PackedScheme : int { kQ8_0, kQ4_0, kQ4_1, kQ4_K, kNvfp4, kMxfp4 };

inline constexpr int kPackedSuperGroup = 256;  // Q4_K's super-group of 8 groups

// The GGUF type name of a scheme ("q8_0", "q4_0", "q4_1", "q4_k", "nvfp4", "mxfp4").
TESSERA_PACKED_HOST_DEVICE constexpr const char* PackedSchemeName(PackedScheme scheme) {
  switch (scheme) {
    case PackedScheme::kQ8_0: return "q8_0";
    case PackedScheme::kQ4_0: return "q4_0";
    case PackedScheme::kQ4_1: return "q4_1";
    case PackedScheme::kQ4_K: return "q4_k";
    case PackedScheme::kNvfp4: return "nvfp4";
    case PackedScheme::kMxfp4: return "mxfp4";
  }
  return "?";
}

// Inputs per group (G).
TESSERA_PACKED_HOST_DEVICE constexpr int PackedGroupSize(PackedScheme scheme) {
  return scheme == PackedScheme::kNvfp4 ? 16 : 32;
}

// Bits per code: 8 for Q8_0, 4 otherwise.
TESSERA_PACKED_HOST_DEVICE constexpr int PackedCodeBits(PackedScheme scheme) {
  return scheme == PackedScheme::kQ8_0 ? 8 : 4;
}

// Bytes of one per-group scale (f16 for the GGUF d's, one byte for sc, E4M3, E8M0).
TESSERA_PACKED_HOST_DEVICE constexpr int PackedScaleBytes(PackedScheme scheme) {
  return scheme == PackedScheme::kQ8_0 || scheme == PackedScheme::kQ4_0 ||
                 scheme == PackedScheme::kQ4_1
             ? 2
             : 1;
}

// Bytes of one per-group min (0: the scheme has no mins).
TESSERA_PACKED_HOST_DEVICE constexpr int PackedMinBytes(PackedScheme scheme) {
  return scheme == PackedScheme::kQ4_1 ? 2 : scheme == PackedScheme::kQ4_K ? 1 : 0;
}

TESSERA_PACKED_HOST_DEVICE constexpr bool PackedHasMins(PackedScheme scheme) {
  return PackedMinBytes(scheme) > 0;
}

// Codes bytes of one row of k inputs.
TESSERA_PACKED_HOST_DEVICE constexpr int64_t PackedRowCodeBytes(PackedScheme scheme, int64_t k) {
  return k * PackedCodeBits(scheme) / 8;
}

// Bytes of an [n, k] weight packed as `scheme`: codes, scales, mins and Q4_K's super-scales.
TESSERA_PACKED_HOST_DEVICE constexpr int64_t PackedWeightBytes(PackedScheme scheme, int64_t n,
                                                               int64_t k) {
  const int64_t groups = k / PackedGroupSize(scheme);
  const int64_t supers = scheme == PackedScheme::kQ4_K ? k / kPackedSuperGroup * 4 : 0;
  return n * (PackedRowCodeBytes(scheme, k) +
              groups * (PackedScaleBytes(scheme) + PackedMinBytes(scheme)) + supers);
}

// The device view of a packed weight (device pointers, arrays as in the table above). Passed to
// the kernels by value.
struct PackedLinear {
  PackedScheme scheme = PackedScheme::kQ8_0;
  int n = 0;  // output rows
  int k = 0;  // inputs
  const uint8_t* codes = nullptr;
  const uint8_t* scales = nullptr;
  const uint8_t* mins = nullptr;           // Q4_1, Q4_K; null otherwise
  const uint16_t* super_scales = nullptr;  // Q4_K: {d, dmin} f16 bits per super-group
  float tensor_scale = 1.0f;               // NVFP4; 1 otherwise
};

// Why (n, k) cannot be packed for `scheme`, or null when it can: a scheme of the enum, k a
// positive multiple of 64 (of 256 for Q4_K), n a positive multiple of 8.
TESSERA_PACKED_HOST_DEVICE constexpr const char* PackedShapeError(PackedScheme scheme, int64_t n,
                                                                  int64_t k) {
  if (scheme < PackedScheme::kQ8_0 || scheme > PackedScheme::kMxfp4) return "unknown scheme";
  if (n <= 0 || n % 8 != 0) return "n must be a positive multiple of 8";
  if (k <= 0 || k % 64 != 0) return "k must be a positive multiple of 64";
  if (scheme == PackedScheme::kQ4_K && k % kPackedSuperGroup != 0) {
    return "k must be a multiple of 256 for Q4_K";
  }
  return nullptr;
}

}  // namespace tessera::cuda
