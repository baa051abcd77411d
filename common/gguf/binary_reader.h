// BinaryReader: a bounds-checked little-endian cursor over an in-memory file image.
//
// Every read first checks the remaining byte count, so no read can go past the end no matter what
// the (untrusted) input says; a failed read leaves the cursor where it was. Errors are plain
// descriptions ("needs 8 bytes at offset 20, file size 24"); the GGUF parser prefixes them with
// what it was reading. Internal to common/gguf.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tessera::gguf::internal {

class BinaryReader {
 public:
  explicit BinaryReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  uint64_t offset() const { return offset_; }
  uint64_t size() const { return bytes_.size(); }
  uint64_t remaining() const { return bytes_.size() - offset_; }

  // Describes a shortfall of `needed` bytes at the cursor.
  std::string Shortfall(uint64_t needed) const {
    return absl::StrCat("needs ", needed, " bytes at offset ", offset_, " but only ", remaining(),
                        " remain (file size ", size(), ")");
  }

  // Reads a little-endian integer (or IEEE float/double via its bit pattern).
  template <typename T>
  absl::Status Read(T* out) {
    static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>);
    if (remaining() < sizeof(T)) return absl::OutOfRangeError(Shortfall(sizeof(T)));
    // Assemble from bytes so the result does not depend on host byte order.
    using U = std::conditional_t<
        sizeof(T) == 1, uint8_t,
        std::conditional_t<sizeof(T) == 2, uint16_t,
                           std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
    U bits = 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      bits |= static_cast<U>(static_cast<U>(bytes_[offset_ + i]) << (8 * i));
    }
    std::memcpy(out, &bits, sizeof(T));
    offset_ += sizeof(T);
    return absl::OkStatus();
  }

  // A view of the next `length` bytes (no copy); fails without moving when they are not there.
  absl::Status ReadBytes(uint64_t length, std::string_view* out) {
    if (remaining() < length) return absl::OutOfRangeError(Shortfall(length));
    *out = std::string_view(reinterpret_cast<const char*>(bytes_.data() + offset_),
                            static_cast<size_t>(length));
    offset_ += length;
    return absl::OkStatus();
  }

 private:
  std::span<const uint8_t> bytes_;
  uint64_t offset_ = 0;
};

}  // namespace tessera::gguf::internal
