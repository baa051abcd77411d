#include "common/tokenizer/utf8.h"

#include <cstdint>

namespace tessera::tokenizer {
namespace {

// Number of bytes a sequence starting with `lead` has, or 0 if `lead` cannot start one.
int SequenceLength(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;  // continuation byte, overlong lead (C0/C1) or above U+10FFFF (F5..FF)
}

// The allowed range of the byte right after `lead` (Table 3-7): the narrowed ranges rule out
// overlongs (E0, F0), surrogates (ED) and code points above U+10FFFF (F4).
bool SecondByteOk(uint8_t lead, uint8_t byte) {
  switch (lead) {
    case 0xE0:
      return byte >= 0xA0 && byte <= 0xBF;
    case 0xED:
      return byte >= 0x80 && byte <= 0x9F;
    case 0xF0:
      return byte >= 0x90 && byte <= 0xBF;
    case 0xF4:
      return byte >= 0x80 && byte <= 0x8F;
    default:
      return byte >= 0x80 && byte <= 0xBF;
  }
}

}  // namespace

Utf8Step DecodeUtf8At(std::string_view text, size_t pos) {
  const auto lead = static_cast<uint8_t>(text[pos]);
  const int length = SequenceLength(lead);
  if (length == 0) return {Utf8Step::Kind::kInvalid, 1, 0};
  if (length == 1) return {Utf8Step::Kind::kValid, 1, lead};
  char32_t code_point = lead & (0xFF >> (length + 1));
  for (int i = 1; i < length; ++i) {
    if (pos + i >= text.size()) return {Utf8Step::Kind::kIncomplete, static_cast<size_t>(i), 0};
    const auto byte = static_cast<uint8_t>(text[pos + i]);
    const bool ok = i == 1 ? SecondByteOk(lead, byte) : (byte >= 0x80 && byte <= 0xBF);
    if (!ok) return {Utf8Step::Kind::kInvalid, static_cast<size_t>(i), 0};
    code_point = (code_point << 6) | (byte & 0x3F);
  }
  return {Utf8Step::Kind::kValid, static_cast<size_t>(length), code_point};
}

bool IsValidUtf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Step step = DecodeUtf8At(text, pos);
    if (step.kind != Utf8Step::Kind::kValid) return false;
    pos += step.length;
  }
  return true;
}

void AppendUtf8(char32_t code_point, std::string* out) {
  if (code_point < 0x80) {
    out->push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

size_t CompleteUtf8Prefix(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Step step = DecodeUtf8At(text, pos);
    if (step.kind == Utf8Step::Kind::kIncomplete) break;
    pos += step.length;
  }
  return pos;
}

std::string SanitizeUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Step step = DecodeUtf8At(text, pos);
    if (step.kind == Utf8Step::Kind::kValid) {
      out.append(text.substr(pos, step.length));
    } else {
      AppendUtf8(kReplacementChar, &out);
    }
    pos += step.length;
  }
  return out;
}

}  // namespace tessera::tokenizer
