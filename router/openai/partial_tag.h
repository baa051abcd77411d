// The one helper the streaming output parsers (reasoning_splitter.h, tool_call_parser.h) share:
// how much of a text's end may be the beginning of a tag, to hold back until the next delta.
// Pure function.
#pragma once

#include <algorithm>
#include <string_view>

namespace tessera::router::openai {

// The length of the longest suffix of `text` that is a proper prefix of `tag`.
inline size_t PartialTagSuffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace tessera::router::openai
