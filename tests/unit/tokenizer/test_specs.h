// Hand-built byte-level BPE specs for tests that must not depend on a real model.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/tokenizer/bpe_spec.h"
#include "common/tokenizer/byte_level.h"

namespace tessera::tokenizer::testing {

// tokens = `specials` (in order), then the 256 byte symbols, then each merge's result (when not
// already present), in merge order. `merges` are "a b" in byte-level symbols.
inline BpeSpec BuildSpec(const std::vector<std::pair<std::string, TokenType>>& specials,
                         const std::vector<std::string>& merges,
                         const std::string& pre_tokenizer = "gpt2") {
  BpeSpec spec;
  spec.model = "gpt2";
  spec.pre_tokenizer = pre_tokenizer;
  for (const auto& [text, type] : specials) {
    spec.tokens.push_back(text);
    spec.token_types.push_back(type);
  }
  for (int byte = 0; byte < 256; ++byte) {
    spec.tokens.push_back(BytesToByteLevel(std::string(1, static_cast<char>(byte))));
    spec.token_types.push_back(TokenType::kNormal);
  }
  for (const std::string& merge : merges) {
    const size_t space = merge.find(' ');
    const std::string merged = merge.substr(0, space) + merge.substr(space + 1);
    bool present = false;
    for (const std::string& token : spec.tokens) present = present || token == merged;
    if (!present) {
      spec.tokens.push_back(merged);
      spec.token_types.push_back(TokenType::kNormal);
    }
    spec.merges.push_back(merge);
  }
  return spec;
}

// Specials <s>, </s>, <|im_start|>, <|im_end|> (control) and <tool> (user-defined), with merges
// that spell "hello", " world" and "ab".
inline BpeSpec TinySpec() {
  BpeSpec spec =
      BuildSpec({{"<s>", TokenType::kControl},
                 {"</s>", TokenType::kControl},
                 {"<|im_start|>", TokenType::kControl},
                 {"<|im_end|>", TokenType::kControl},
                 {"<tool>", TokenType::kUserDefined}},
                {"h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld", "a b"});
  spec.bos_id = 0;
  spec.eos_id = 1;
  spec.pad_id = 1;
  return spec;
}

}  // namespace tessera::tokenizer::testing
