#include "tools/convert/tiny_vocab.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/tokenizer/bpe_trainer.h"
#include "common/util/check.h"

namespace tessera::convert {
namespace {

// Written for this tool. Ordinary prose so the merges look like a real English vocabulary
// (" the", "ing", " and", ...), plus ChatML turns so role names and newlines get merges too.
constexpr std::string_view kCorpus =
    R"corpus(The harbor town woke up slowly on a grey morning in late autumn. Fishing boats rocked
against the wooden pier, and the smell of salt and diesel drifted over the market square. The
baker opened his shutters first, as he had done every day for thirty years, and the first
customers were already waiting with their hands in their pockets and their collars turned up
against the wind.

A small library stood at the corner of the square. It had two rooms, a reading table and a
stove that nobody was allowed to touch except the librarian. Children came in the afternoon to
read about ships, mountains and distant cities. The librarian kept a notebook of every question
they asked, and on Fridays she tried to answer the hardest one in front of everyone.

Learning to cook is mostly learning to pay attention. You notice when the onions turn soft and
sweet, when the water starts to boil, when the bread sounds hollow as you tap it. Recipes help,
but the real teacher is the kitchen itself: the heat of the pan, the time of day, the people
who are hungry and waiting at the table.

Computers follow instructions exactly, which is both their strength and their weakness. A
program does what it was told to do, not what its author meant. Good engineers therefore write
small pieces, test each one, and read the error messages carefully. When something breaks, they
ask what changed, write the answer down, and fix the cause instead of the symptom.

The river runs from the hills to the sea, and the road follows it most of the way. In spring
the water is high and fast; in summer it is slow and clear enough to see the stones on the
bottom. Farmers along the river grow apples, pears and potatoes, and they sell them on Saturday
mornings in the harbor town.

<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
What is the capital of France?<|im_end|>
<|im_start|>assistant
The capital of France is Paris.<|im_end|>
<|im_start|>user
How many days are there in a week?<|im_end|>
<|im_start|>assistant
There are seven days in a week.<|im_end|>
<|endoftext|>)corpus";

// SmolLM2-135M-Instruct's template, byte for byte, with a shorter default system prompt.
constexpr std::string_view kTemplateBeforeSystem =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\n";
constexpr std::string_view kTemplateAfterSystem =
    "<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% endif %}";

// Meta-Llama-3-8B-Instruct's chat template, byte for byte.
constexpr std::string_view kLlama3Template =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim "
    "+ '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant"
    "<|end_header_id|>\n\n' }}{% endif %}";

void AddIdIfPresent(const std::string& key, tokenizer::TokenId id, gguf::GgufWriter* writer) {
  if (id >= 0) writer->AddUint32(key, static_cast<uint32_t>(id));
}

}  // namespace

std::string_view TinyCorpus() { return kCorpus; }

absl::StatusOr<tokenizer::BpeSpec> TrainTinyVocab(int num_merges, TinyChatStyle style) {
  if (num_merges < 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_merges must be >= 0, got ", num_merges));
  }
  if (style == TinyChatStyle::kLlama3) {
    absl::StatusOr<tokenizer::BpeSpec> spec = tokenizer::TrainByteLevelBpe(
        kCorpus, num_merges,
        {"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
         "<|eot_id|>"});
    if (!spec.ok()) return spec.status();
    // As Llama 3 Instruct's GGUF: BOS <|begin_of_text|>, a turn (and the answer) ends with
    // <|eot_id|>; the template adds BOS itself.
    spec->bos_id = 0;
    spec->eos_id = 4;
    spec->add_bos = false;
    spec->add_eos = false;
    return spec;
  }
  absl::StatusOr<tokenizer::BpeSpec> spec = tokenizer::TrainByteLevelBpe(
      kCorpus, num_merges, {"<|endoftext|>", "<|im_start|>", "<|im_end|>"});
  if (!spec.ok()) return spec.status();
  // The trainer numbers the specials in the order given; the roles follow SmolLM2-Instruct's
  // GGUF: a chat turn ends with <|im_end|>, so that is EOS (and PAD); <|endoftext|> is UNK.
  spec->bos_id = kTinyImStartId;
  spec->eos_id = kTinyImEndId;
  spec->pad_id = kTinyImEndId;
  spec->unk_id = kTinyEndOfTextId;
  spec->add_bos = false;
  spec->add_eos = false;
  return spec;
}

std::string TinyChatTemplate(TinyChatStyle style) {
  if (style == TinyChatStyle::kLlama3) return std::string(kLlama3Template);
  return absl::StrCat(std::string(kTemplateBeforeSystem), std::string(kTinyDefaultSystemPrompt),
                      std::string(kTemplateAfterSystem));
}

void AddBpeSpecToGguf(const tokenizer::BpeSpec& spec, gguf::GgufWriter* writer) {
  TESSERA_CHECK(spec.tokens.size() == spec.token_types.size(),
                "BpeSpec tokens and token_types differ in length");
  writer->AddString("tokenizer.ggml.model", spec.model);
  writer->AddString("tokenizer.ggml.pre", spec.pre_tokenizer);
  writer->AddStringArray("tokenizer.ggml.tokens", spec.tokens);
  std::vector<int32_t> types;
  types.reserve(spec.token_types.size());
  for (tokenizer::TokenType type : spec.token_types) types.push_back(static_cast<int32_t>(type));
  writer->AddInt32Array("tokenizer.ggml.token_type", types);
  writer->AddStringArray("tokenizer.ggml.merges", spec.merges);
  AddIdIfPresent("tokenizer.ggml.bos_token_id", spec.bos_id, writer);
  AddIdIfPresent("tokenizer.ggml.eos_token_id", spec.eos_id, writer);
  AddIdIfPresent("tokenizer.ggml.unknown_token_id", spec.unk_id, writer);
  AddIdIfPresent("tokenizer.ggml.padding_token_id", spec.pad_id, writer);
  writer->AddBool("tokenizer.ggml.add_bos_token", spec.add_bos);
  writer->AddBool("tokenizer.ggml.add_eos_token", spec.add_eos);
}

void AddTinyTokenizer(const tokenizer::BpeSpec& spec, gguf::GgufWriter* writer,
                      TinyChatStyle style) {
  AddBpeSpecToGguf(spec, writer);
  writer->AddString("tokenizer.chat_template", TinyChatTemplate(style));
}

}  // namespace tessera::convert
