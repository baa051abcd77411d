#include "common/safetensors/safetensors_dtype.h"

namespace tessera::safetensors {
namespace {

struct DtypeEntry {
  Dtype dtype;
  std::string_view name;
  uint64_t size;
};

constexpr DtypeEntry kDtypes[] = {
    {Dtype::kBool, "BOOL", 1},      {Dtype::kU8, "U8", 1},          {Dtype::kI8, "I8", 1},
    {Dtype::kF8E5M2, "F8_E5M2", 1}, {Dtype::kF8E4M3, "F8_E4M3", 1}, {Dtype::kF8E8M0, "F8_E8M0", 1},
    {Dtype::kI16, "I16", 2},        {Dtype::kU16, "U16", 2},        {Dtype::kF16, "F16", 2},
    {Dtype::kBF16, "BF16", 2},      {Dtype::kI32, "I32", 4},        {Dtype::kU32, "U32", 4},
    {Dtype::kF32, "F32", 4},        {Dtype::kF64, "F64", 8},        {Dtype::kI64, "I64", 8},
    {Dtype::kU64, "U64", 8},
};

const DtypeEntry& Entry(Dtype dtype) { return kDtypes[static_cast<int>(dtype)]; }

}  // namespace

std::optional<Dtype> ParseDtype(std::string_view name) {
  for (const DtypeEntry& entry : kDtypes) {
    if (entry.name == name) return entry.dtype;
  }
  return std::nullopt;
}

std::string_view DtypeName(Dtype dtype) { return Entry(dtype).name; }

uint64_t DtypeSize(Dtype dtype) { return Entry(dtype).size; }

}  // namespace tessera::safetensors
