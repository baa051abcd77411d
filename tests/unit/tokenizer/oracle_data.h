// Loads tests/data/tokenizer/smollm2_reference.json (written by
// tools/oracle/tokenizer_reference.py): corpus texts with the ids HF `tokenizers` produces.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace tessera::tokenizer::testing {

inline constexpr char kReferencePath[] = "tests/data/tokenizer/smollm2_reference.json";
inline constexpr char kHfTokenizerPath[] = "tests/data/tokenizer/smollm2_hf/tokenizer.json";
inline constexpr char kModelPath[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

struct OracleCase {
  std::string text;
  std::vector<TokenId> ids;                     // special tokens parsed
  std::vector<TokenId> ids_no_special_parsing;  // special tokens as plain text
};

// Empty on a missing/unreadable file (callers assert non-empty).
inline std::vector<OracleCase> LoadOracleCases(const std::string& path = kReferencePath) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const nlohmann::json root = nlohmann::json::parse(buffer.str(), nullptr, false);
  std::vector<OracleCase> cases;
  if (root.is_discarded() || !root.contains("cases")) return cases;
  for (const nlohmann::json& c : root["cases"]) {
    cases.push_back({c["text"].get<std::string>(), c["ids"].get<std::vector<TokenId>>(),
                     c["ids_no_special_parsing"].get<std::vector<TokenId>>()});
  }
  return cases;
}

}  // namespace tessera::tokenizer::testing
