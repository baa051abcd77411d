// The vocabulary and chat template of the generated tiny test model: a real byte-level BPE
// (trained on a short embedded English text) laid out like SmolLM2's, so tokenizer, chat and
// detokenization code paths behave as with a real model.
//
// Special tokens (type control):
//   0 "<|endoftext|>"  eos and pad
//   1 "<|im_start|>"   bos
//   2 "<|im_end|>"
// then the 256 byte symbols, then one token per merge.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/gguf/gguf_writer.h"
#include "common/tokenizer/bpe_spec.h"

namespace tessera::convert {

inline constexpr int kTinyEndOfTextId = 0;
inline constexpr int kTinyImStartId = 1;
inline constexpr int kTinyImEndId = 2;
inline constexpr std::string_view kTinyDefaultSystemPrompt = "You are a tiny test model.";

// The training text (a few paragraphs of plain English and two ChatML conversations).
std::string_view TinyCorpus();

// The chat markup a tiny model speaks: its special tokens and chat template.
//   kChatMl  SmolLM2's (the ids above; EOS <|im_end|>);
//   kLlama3  Llama 3 Instruct's: 0 <|begin_of_text|> (BOS), 1 <|end_of_text|>,
//            2 <|start_header_id|>, 3 <|end_header_id|>, 4 <|eot_id|> (EOS), and Meta's
//            Llama 3 Instruct template, byte for byte.
enum class TinyChatStyle { kChatMl, kLlama3 };

// Trains the vocabulary with `num_merges` merges (fewer when the corpus runs out of repeated
// pairs), its specials those of `style`. INVALID_ARGUMENT for num_merges < 0.
absl::StatusOr<tokenizer::BpeSpec> TrainTinyVocab(int num_merges,
                                                  TinyChatStyle style = TinyChatStyle::kChatMl);

// kChatMl: SmolLM2's ChatML template with kTinyDefaultSystemPrompt as its default system prompt;
// kLlama3: Llama 3 Instruct's.
std::string TinyChatTemplate(TinyChatStyle style = TinyChatStyle::kChatMl);

// Stores `spec` as the tokenizer.ggml.* keys llama.cpp reads for a "gpt2" (byte-level BPE)
// tokenizer. Precondition: spec.tokens and spec.token_types have the same length (checked).
void AddBpeSpecToGguf(const tokenizer::BpeSpec& spec, gguf::GgufWriter* writer);

// What every generated tiny model (llama and hybrid) stores after its hyper-parameters: `spec`
// (a TrainTinyVocab result of `style`) as the tokenizer.ggml.* keys, then
// TinyChatTemplate(style) as tokenizer.chat_template.
void AddTinyTokenizer(const tokenizer::BpeSpec& spec, gguf::GgufWriter* writer,
                      TinyChatStyle style = TinyChatStyle::kChatMl);

}  // namespace tessera::convert
