#include "worker/sampler/slot_grammars.h"

#include <algorithm>
#include <exception>
#include <semaphore>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grammar/grammar_spec.h"
#include "common/util/check.h"
#include "xgrammar/xgrammar.h"

namespace tessera::worker {
namespace {

namespace v1 = ::tessera::worker::v1;

// xgrammar's compile cache: compiled grammars (token-mask caches over the vocabulary) are kept up
// to this many bytes, least recently used evicted.
constexpr int64_t kCompiledGrammarCacheBytes = int64_t{256} << 20;
constexpr int kCompileThreads = 2;

absl::StatusOr<grammar::GrammarSpec> SpecOf(const v1::Grammar& grammar) {
  using grammar::GrammarKind;
  switch (grammar.kind()) {
    case v1::GRAMMAR_KIND_JSON_OBJECT: return grammar::GrammarSpec{GrammarKind::kJsonObject, ""};
    case v1::GRAMMAR_KIND_JSON_SCHEMA:
      return grammar::GrammarSpec{GrammarKind::kJsonSchema, grammar.text()};
    case v1::GRAMMAR_KIND_REGEX: return grammar::GrammarSpec{GrammarKind::kRegex, grammar.text()};
    case v1::GRAMMAR_KIND_EBNF: return grammar::GrammarSpec{GrammarKind::kEbnf, grammar.text()};
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("grammar.kind ", grammar.kind(), " is not a grammar"));
  }
}

DLTensor MaskTensor(uint32_t* words, int64_t* shape) {
  DLTensor tensor{};
  tensor.data = words;
  tensor.device = DLDevice{kDLCPU, 0};
  tensor.ndim = 1;
  tensor.dtype = xgrammar::GetBitmaskDLType();
  tensor.shape = shape;
  return tensor;
}

}  // namespace

GrammarVocabulary GrammarVocabularyOf(const tokenizer::Tokenizer& tokenizer) {
  GrammarVocabulary vocabulary;
  const int32_t size = tokenizer.info().vocab_size;
  vocabulary.token_bytes.resize(static_cast<size_t>(size));
  for (int32_t id = 0; id < size; ++id) {
    if (tokenizer.GetTokenType(id) == tokenizer::TokenType::kControl) continue;
    vocabulary.token_bytes[static_cast<size_t>(id)] = tokenizer.TokenBytes(id);
  }
  return vocabulary;
}

struct SlotGrammars::State {
  State(const GrammarVocabulary& vocabulary, int vocab_size)
      // RAW: the strings are already the bytes each token stands for. No stop tokens here: each
      // request brings its own (override_stop_tokens).
      : info(vocabulary.token_bytes, xgrammar::VocabType::RAW, vocab_size,
             std::vector<int32_t>{}),
        compiler(info, kCompileThreads, /*cache_enabled=*/true, kCompiledGrammarCacheBytes) {}

  xgrammar::CompiledGrammar Compile(const grammar::GrammarSpec& spec) {
    switch (spec.kind) {
      case grammar::GrammarKind::kJsonObject:
        return compiler.CompileJSONSchema(R"({"type": "object"})", /*any_whitespace=*/false);
      case grammar::GrammarKind::kJsonSchema:
        return compiler.CompileJSONSchema(spec.text, /*any_whitespace=*/false);
      case grammar::GrammarKind::kRegex:
        return compiler.CompileRegex(spec.text);
      case grammar::GrammarKind::kEbnf:
        return compiler.CompileGrammar(spec.text, "root");
    }
    std::abort();
  }

  xgrammar::TokenizerInfo info;
  xgrammar::GrammarCompiler compiler;
  std::counting_semaphore<kMaxConcurrentCompiles> compile_slots{kMaxConcurrentCompiles};
  std::vector<std::optional<xgrammar::GrammarMatcher>> matchers;  // [max_num_seqs]
  std::vector<uint32_t> masks;                                    // [max_num_seqs * words]
  xgrammar::BatchGrammarMatcher batch{std::string("auto")};
  std::vector<xgrammar::GrammarMatcher> fill_matchers;  // FillMasks scratch
  std::vector<int32_t> fill_rows;
};

SlotGrammars::SlotGrammars(const GrammarVocabulary& vocabulary, int vocab_size, int max_num_seqs)
    : vocab_size_(vocab_size), mask_words_(xgrammar::GetBitmaskSize(vocab_size)) {
  TESSERA_CHECK(vocab_size >= static_cast<int>(vocabulary.token_bytes.size()) && max_num_seqs >= 1,
                "SlotGrammars: the logits are narrower than the vocabulary");
  state_ = std::make_unique<State>(vocabulary, vocab_size);
  state_->matchers.resize(static_cast<size_t>(max_num_seqs));
  state_->masks.resize(static_cast<size_t>(max_num_seqs) * static_cast<size_t>(mask_words_));
}

SlotGrammars::~SlotGrammars() = default;

// Off the step thread: parse first, for the clean message naming what is wrong, then compile.
absl::Status SlotGrammars::Prepare(const v1::Grammar& grammar) {
  absl::StatusOr<grammar::GrammarSpec> spec = SpecOf(grammar);
  if (!spec.ok()) return spec.status();
  if (absl::StatusOr<xgrammar::Grammar> parsed = grammar::ParseGrammar(*spec); !parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("grammar: ", parsed.status().message()));
  }
  state_->compile_slots.acquire();
  const absl::Status status = Check(grammar, {});
  state_->compile_slots.release();
  return status;
}

absl::Status SlotGrammars::Check(const v1::Grammar& grammar, std::span<const int32_t> generated) {
  for (const int32_t id : grammar.stop_token_ids()) {
    if (id < 0 || id >= vocab_size_) {
      return absl::InvalidArgumentError(
          absl::StrCat("grammar.stop_token_ids has ", id, ", outside [0, ", vocab_size_, ")"));
    }
  }
  // No separate parse here (the step thread): the router parsed it and PrepareGrammar compiled
  // it, so this is a cache hit; a grammar that fails anyway fails in the compile.
  absl::StatusOr<grammar::GrammarSpec> spec = SpecOf(grammar);
  if (!spec.ok()) return spec.status();
  std::optional<xgrammar::CompiledGrammar> compiled;
  try {
    compiled = state_->Compile(*spec);
  } catch (const std::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat("grammar: does not compile: ", error.what()));
  }
  if (generated.empty()) return absl::OkStatus();
  xgrammar::GrammarMatcher replay(*compiled, std::vector<int>(grammar.stop_token_ids().begin(),
                                                              grammar.stop_token_ids().end()));
  for (size_t i = 0; i < generated.size() && !replay.IsTerminated(); ++i) {
    if (generated[i] < 0 || generated[i] >= vocab_size_ || !replay.AcceptToken(generated[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "grammar: generated token ", i, " (", generated[i], ") is not allowed by the grammar"));
    }
  }
  return absl::OkStatus();
}

bool SlotGrammars::active(int slot) const {
  return slot >= 0 && static_cast<size_t>(slot) < state_->matchers.size() &&
         state_->matchers[static_cast<size_t>(slot)].has_value();
}

bool SlotGrammars::constrains(int slot) const {
  return active(slot) && !state_->matchers[static_cast<size_t>(slot)]->IsTerminated();
}

void SlotGrammars::Begin(int slot, const v1::Grammar& grammar, std::span<const int32_t> generated) {
  TESSERA_CHECK(slot >= 0 && static_cast<size_t>(slot) < state_->matchers.size() && !active(slot),
                "SlotGrammars::Begin: slot out of range or already started");
  absl::StatusOr<grammar::GrammarSpec> spec = SpecOf(grammar);
  TESSERA_CHECK(spec.ok(), "SlotGrammars::Begin: the grammar was not checked");
  std::vector<int> stops(grammar.stop_token_ids().begin(), grammar.stop_token_ids().end());
  state_->matchers[static_cast<size_t>(slot)].emplace(state_->Compile(*spec), std::move(stops));
  for (const int32_t token : generated) Accept(slot, token);
}

void SlotGrammars::End(int slot) {
  if (active(slot)) state_->matchers[static_cast<size_t>(slot)].reset();
}

void SlotGrammars::FillMasks(std::span<const int32_t> slots) {
  std::vector<xgrammar::GrammarMatcher>& matchers = state_->fill_matchers;
  std::vector<int32_t>& rows = state_->fill_rows;
  matchers.clear();
  rows.clear();
  for (const int32_t slot : slots) {
    TESSERA_CHECK(active(slot), "SlotGrammars::FillMasks: a slot without a grammar");
    const xgrammar::GrammarMatcher& matcher = *state_->matchers[static_cast<size_t>(slot)];
    if (matcher.IsTerminated()) continue;
    matchers.push_back(matcher);  // a handle: the copy shares the matcher's state
    rows.push_back(slot);
  }
  if (matchers.empty()) return;
  int64_t shape[2] = {static_cast<int64_t>(state_->matchers.size()), mask_words_};
  DLTensor tensor = MaskTensor(state_->masks.data(), shape);
  tensor.ndim = 2;
  if (matchers.size() == 1) {
    matchers[0].FillNextTokenBitmask(&tensor, rows[0]);
  } else {
    state_->batch.BatchFillNextTokenBitmask(&matchers, &tensor, rows);
  }
}

std::span<const uint32_t> SlotGrammars::Mask(int slot) const {
  TESSERA_CHECK(active(slot), "SlotGrammars::Mask: a slot without a grammar");
  if (state_->matchers[static_cast<size_t>(slot)]->IsTerminated()) return {};
  return std::span<const uint32_t>(state_->masks)
      .subspan(static_cast<size_t>(slot) * static_cast<size_t>(mask_words_),
               static_cast<size_t>(mask_words_));
}

void SlotGrammars::Accept(int slot, int32_t token) {
  TESSERA_CHECK(active(slot), "SlotGrammars::Accept: a slot without a grammar");
  xgrammar::GrammarMatcher& matcher = *state_->matchers[static_cast<size_t>(slot)];
  if (matcher.IsTerminated()) return;
  TESSERA_CHECK(token >= 0 && token < vocab_size_ && matcher.AcceptToken(token),
                "SlotGrammars::Accept: a token its grammar's mask did not allow was sampled");
}

}  // namespace tessera::worker
