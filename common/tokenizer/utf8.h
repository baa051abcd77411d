// Minimal UTF-8 helpers shared by the byte-level map, the pre-tokenizer and the streaming decoder.
// Validation follows Unicode Table 3-7 (no overlongs, no surrogates, nothing above U+10FFFF), and
// ill-formed input is measured in "maximal subparts" so each gets exactly one U+FFFD (the
// substitution practice Unicode recommends and most decoders follow). Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tessera::tokenizer {

inline constexpr char32_t kReplacementChar = 0xFFFD;

struct Utf8Step {
  enum class Kind {
    kValid,       // a well-formed code point of `length` bytes
    kInvalid,     // `length` bytes (>= 1) that can never start a well-formed sequence
    kIncomplete,  // a well-formed prefix of `length` bytes cut off by the end of the input
  };
  Kind kind = Kind::kValid;
  size_t length = 0;
  char32_t code_point = 0;  // only for kValid
};

// Decodes the sequence starting at `text[pos]`. Precondition: pos < text.size().
Utf8Step DecodeUtf8At(std::string_view text, size_t pos);

bool IsValidUtf8(std::string_view text);
void AppendUtf8(char32_t code_point, std::string* out);

// Length of the longest prefix of `text` that does not end inside an incomplete (but so far
// well-formed) sequence. Ill-formed bytes count as complete: more input cannot fix them.
size_t CompleteUtf8Prefix(std::string_view text);

// `text` with each maximal ill-formed subpart (including a truncated tail) replaced by U+FFFD.
std::string SanitizeUtf8(std::string_view text);

}  // namespace tessera::tokenizer
