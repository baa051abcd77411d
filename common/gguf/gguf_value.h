// GGUF metadata values: every GGUF value type, including arrays nested to any depth.
// Plain data; immutable after parsing; safe to read from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tessera::gguf {

// Wire ids of GGUF metadata value types (gguf.md, "gguf_metadata_value_type").
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "uint32", "array", ...; "unknown(N)" for ids outside the enum.
std::string GgufValueTypeName(GgufValueType type);

class GgufValue;

// An array's element type is stored once; for nested arrays every element is itself kArray.
struct GgufArray {
  GgufValueType element_type = GgufValueType::kUint8;
  std::vector<GgufValue> elements;
};

class GgufValue {
 public:
  using Storage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                               std::string, GgufArray, uint64_t, int64_t, double>;

  GgufValue() = default;
  explicit GgufValue(Storage storage) : storage_(std::move(storage)) {}

  // The variant index equals the wire id of the type, so this is exact.
  GgufValueType type() const { return static_cast<GgufValueType>(storage_.index()); }
  const Storage& storage() const { return storage_; }

  template <typename T>
  const T* GetIf() const { return std::get_if<T>(&storage_); }

  bool IsInteger() const;  // any of the 8 integer types (bool is not an integer)
  bool IsFloat() const;    // float32 or float64
  // Preconditions: IsInteger() / IsFloat() || IsInteger(). Checked (aborts otherwise).
  int64_t AsInt64() const;   // uint64 values above INT64_MAX abort; callers check first
  double AsDouble() const;

  // Short human-readable rendering; long arrays are elided ("[1, 2, 3, ... (49152 items)]").
  std::string DebugString(size_t max_elements = 8) const;

 private:
  Storage storage_;
};

}  // namespace tessera::gguf
