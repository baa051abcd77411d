// BpeSpec: the plain data that fully describes a byte-level BPE tokenizer. The GGUF loader, the
// HF tokenizer.json loader and the BPE trainer all produce one; BpeTokenizer::Create consumes it;
// the tiny-model writer stores one into GGUF (`tokenizer.ggml.*` keys, one field per key).
#pragma once

#include <string>
#include <vector>

#include "common/tokenizer/tokenizer.h"  // TokenId, TokenType

namespace tessera::tokenizer {

struct BpeSpec {
  std::string model = "gpt2";          // tokenizer.ggml.model
  std::string pre_tokenizer;           // tokenizer.ggml.pre ("smollm", "gpt2", "llama3", ...)
  std::vector<std::string> tokens;     // tokenizer.ggml.tokens, in byte-level symbols; id = index
  std::vector<TokenType> token_types;  // tokenizer.ggml.token_type; same length as tokens
  std::vector<std::string> merges;     // tokenizer.ggml.merges, "a b"; rank = index
  TokenId bos_id = -1;                 // tokenizer.ggml.bos_token_id; -1 when absent
  TokenId eos_id = -1;                 // tokenizer.ggml.eos_token_id
  TokenId pad_id = -1;                 // tokenizer.ggml.padding_token_id
  TokenId unk_id = -1;                 // tokenizer.ggml.unknown_token_id
  bool add_bos = false;                // tokenizer.ggml.add_bos_token
  bool add_eos = false;                // tokenizer.ggml.add_eos_token

  // Not stored in GGUF (a GGUF implies both from `pre_tokenizer`). The HF loader sets them because
  // tokenizer.json carries the split regexes themselves: when non-empty, `pre_regexes` replaces
  // the regexes `pre_tokenizer` names (see pre_tokenizer.h for how a sequence is applied).
  std::vector<std::string> pre_regexes;
  bool ignore_merges = false;  // HF model.ignore_merges
  // A byte whose symbol is not in the vocab (SmolLM2 lacks 21 of the 256) is dropped, as llama.cpp
  // and HF (model.unk_token null) do; true maps it to unk_id instead (HF with model.unk_token).
  bool unknown_bytes_to_unk = false;
};

}  // namespace tessera::tokenizer
