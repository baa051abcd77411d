#include "common/tokenizer/byte_level.h"

#include <array>

#include "common/tokenizer/utf8.h"

namespace tessera::tokenizer {
namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for
// themselves; the other 68 bytes (controls, space, DEL, NBSP, soft hyphen) are moved, in byte
// order, to U+0100 upward so every symbol is a visible, non-space character.
struct ByteLevelTables {
  std::array<char32_t, 256> byte_to_code_point{};
  std::array<int16_t, 324> code_point_to_byte{};  // 256 + 68 code points; -1 = not in alphabet

  ByteLevelTables() {
    code_point_to_byte.fill(-1);
    int next_moved = 256;
    for (int byte = 0; byte < 256; ++byte) {
      const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
                             (byte >= 0xAE && byte <= 0xFF);
      const char32_t code_point = printable ? byte : next_moved++;
      byte_to_code_point[byte] = code_point;
      code_point_to_byte[code_point] = static_cast<int16_t>(byte);
    }
  }
};

const ByteLevelTables& Tables() {
  static const ByteLevelTables tables;  // immutable after first use; thread-safe init
  return tables;
}

}  // namespace

char32_t ByteToCodePoint(uint8_t byte) { return Tables().byte_to_code_point[byte]; }

std::optional<uint8_t> CodePointToByte(char32_t code_point) {
  const auto& table = Tables().code_point_to_byte;
  if (code_point >= table.size() || table[code_point] < 0) return std::nullopt;
  return static_cast<uint8_t>(table[code_point]);
}

std::string BytesToByteLevel(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) AppendUtf8(ByteToCodePoint(static_cast<uint8_t>(c)), &out);
  return out;
}

std::optional<std::string> ByteLevelToBytes(std::string_view byte_level_text) {
  std::string out;
  out.reserve(byte_level_text.size());
  for (size_t pos = 0; pos < byte_level_text.size();) {
    const Utf8Step step = DecodeUtf8At(byte_level_text, pos);
    if (step.kind != Utf8Step::Kind::kValid) return std::nullopt;
    const std::optional<uint8_t> byte = CodePointToByte(step.code_point);
    if (!byte) return std::nullopt;
    out.push_back(static_cast<char>(*byte));
    pos += step.length;
  }
  return out;
}

}  // namespace tessera::tokenizer
