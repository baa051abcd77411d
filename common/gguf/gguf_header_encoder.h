// Encodes a GGUF header (magic, version, metadata, tensor infos) as the parser reads it
// (gguf_parser.cc), padded to the alignment so tensor data can follow. Shared by the in-memory
// GgufWriter and the streaming GgufStreamWriter. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/gguf/ggml_type.h"
#include "common/gguf/gguf_value.h"

namespace tessera::gguf {

// A tensor as the header describes it; its data section offset follows from the order.
struct GgufTensorSpec {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order: dims[0] contiguous; 1..4 dims
  GgmlType type = GgmlType::kF32;
};

using GgufMetadataList = std::vector<std::pair<std::string, GgufValue>>;

// Bytes of a tensor's data. Aborts unless 1 <= dims.size() <= 4 and dims[0] is a multiple of
// the type's block size (a broken invariant of the caller, not bad input).
uint64_t GgufTensorDataBytes(const GgufTensorSpec& tensor);

uint64_t GgufAlignUp(uint64_t offset, uint64_t alignment);

// The header, zero-padded to `alignment`; tensor i's data starts at its aligned offset after
// the previous tensors (each padded to the alignment). Metadata is written in the given order.
std::vector<uint8_t> EncodeGgufHeader(uint32_t version, uint64_t alignment,
                                      const GgufMetadataList& metadata,
                                      const std::vector<GgufTensorSpec>& tensors);

}  // namespace tessera::gguf
