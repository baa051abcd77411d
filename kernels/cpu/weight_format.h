// Weight storage formats the CPU kernels read, and a non-owning view of a weight matrix.
//
// Layout is GGUF/ggml's: a tensor with GGUF dims [k, n] is n rows of k contiguous elements; for
// block formats each row is k / FormatBlockElements consecutive blocks (32 elements, 64 for
// NVFP4; see quant.h for the block layouts).
#pragma once

#include <optional>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/gguf/ggml_type.h"

namespace tessera::kernels::cpu {

enum class WeightFormat {
  kF32,
  kF16,   // IEEE half; rows may be dequantized (DequantizeRow), not used by Matmul
  kBF16,  // bfloat16; same
  kQ8_0,  // 32-element blocks: f16 d, 32 x int8 q; value = d * q
  kQ4_0,  // 32-element blocks: f16 d, 16 bytes of nibbles; value = d * (q - 8)
  kQ4_1,  // 32-element blocks: f16 d, f16 m, 16 bytes of nibbles; value = d * q + m
  kMxfp4,  // 32-element blocks: E8M0 scale, 16 bytes of E2M1 nibbles (ggml type 39)
  kNvfp4,  // 64-element blocks: 4 UE4M3 scales (one per 16), 32 bytes of E2M1 nibbles (type 40)
};

// Elements per block of Q8_0, Q4_0, Q4_1 and MXFP4, and the unit the matmul walks k in (an NVFP4
// block is two such chunks).
inline constexpr int kQuantBlockSize = 32;

std::string_view WeightFormatName(WeightFormat format);

// The GGUF tensor type with the same encoding.
gguf::GgmlType ToGgmlType(WeightFormat format);
// The kernel format for a GGUF tensor type; nullopt for types the kernels do not read directly.
std::optional<WeightFormat> WeightFormatFromGgml(gguf::GgmlType type);

// Elements per block (1 for plain formats).
int64_t FormatBlockElements(WeightFormat format);

// Bytes per block (per element for plain formats).
size_t FormatBlockBytes(WeightFormat format);

// Bytes of one row of `cols` elements. Precondition: cols % FormatBlockElements(format) == 0.
size_t RowBytes(WeightFormat format, int64_t cols);

// A matrix [rows, cols] in `format`, rows contiguous, row r at data + r * RowBytes(format, cols).
// Non-owning; the memory (e.g. an mmapped GGUF file) must outlive every use of the view.
struct WeightView {
  WeightFormat format = WeightFormat::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;

  const uint8_t* Row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + static_cast<size_t>(r) * RowBytes(format, cols);
  }
};

}  // namespace tessera::kernels::cpu
