// GGML tensor element types as stored in GGUF tensor infos, and their block geometry.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tessera::gguf {

// Wire ids from ggml.h (enum ggml_type). Only ids listed here are accepted by the reader.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
  kMxfp4 = 39,  // 4-bit floats, E8M0 scale per 32 (docs/design/fp4-formats.md)
  kNvfp4 = 40,  // 4-bit floats, UE4M3 scale per 16, in 64-element blocks (same doc)
};

struct GgmlTypeInfo {
  GgmlType type;
  const char* name;      // "Q4_1", "F32", ... as ggml spells it
  uint32_t block_size;   // elements per block (1 for plain types)
  uint32_t type_size;    // bytes per block
};

// nullopt for ids that are not a known ggml type.
std::optional<GgmlTypeInfo> LookupGgmlType(uint32_t raw_type);
const GgmlTypeInfo& GetGgmlTypeInfo(GgmlType type);  // precondition: a valid enumerator
std::string GgmlTypeName(GgmlType type);

}  // namespace tessera::gguf
