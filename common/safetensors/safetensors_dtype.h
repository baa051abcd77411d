// The element types a .safetensors header names ("dtype"), with their byte sizes: every
// byte-sized type the safetensors format defines. The sub-byte ones (F4, F6_*) are not accepted:
// ParseDtype reports them, like any unknown name, as not supported.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera::safetensors {

enum class Dtype {
  kBool,
  kU8,
  kI8,
  kF8E5M2,
  kF8E4M3,
  kF8E8M0,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kF64,
  kI64,
  kU64,
};

// nullopt for a name that is not one of the above ("F8_E4M3", "BF16", ... as safetensors spells
// them).
std::optional<Dtype> ParseDtype(std::string_view name);
std::string_view DtypeName(Dtype dtype);
uint64_t DtypeSize(Dtype dtype);  // bytes per element

}  // namespace tessera::safetensors
