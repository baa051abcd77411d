// GPT-2 byte-level alphabet: the reversible map between raw bytes and the 256 printable code
// points that byte-level BPE vocabularies are written in (e.g. ' ' -> 'Ġ', '\n' -> 'Ċ').
// Pure functions over static tables; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tessera::tokenizer {

// The code point that stands for `byte`.
char32_t ByteToCodePoint(uint8_t byte);
// The byte a code point stands for; nullopt if it is not one of the 256.
std::optional<uint8_t> CodePointToByte(char32_t code_point);

// Raw bytes -> the UTF-8 encoding of their byte-level symbols.
std::string BytesToByteLevel(std::string_view bytes);
// UTF-8 byte-level text -> raw bytes; nullopt if it holds a code point outside the alphabet or
// is not valid UTF-8.
std::optional<std::string> ByteLevelToBytes(std::string_view byte_level_text);

}  // namespace tessera::tokenizer
