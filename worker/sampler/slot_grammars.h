// SlotGrammars: the structured-output state of the worker's slots. A slot admitted with a grammar
// (NewSequence.grammar) gets an xgrammar matcher over the model's vocabulary; before each step
// the slot's token mask is filled (bit t set: token t may come next), the runner masks every
// other token out of the slot's logits before sampling (on its backend: the cpu sampler, the
// cuda mask kernel), and the sampled token advances the matcher.
//
// Why here (DESIGN.md §2): the mask for step N+1 depends on the token sampled at step N, which
// only the worker knows when the router sends plan N+1 (one plan in flight). Kept next to the
// sampler, the mask costs no round trip and pipelining holds. The router parses every grammar
// first (400 on a bad one); the worker compiles it against its own vocabulary, and xgrammar's
// compiler caches compiled grammars (by spec, memory-bounded), so a repeated schema compiles once.
//
// Once complete, a grammar allows only its stop tokens (the request's EOS and stop ids). After a
// stop token the matcher is terminated; a step the router had already sent past it (one late)
// samples unmasked, and the router discards that token.
//
// Compiling is the one part other threads may do: Prepare (the PrepareGrammar RPC, before the
// router schedules a guided request) fills the compiler's cache, so the step thread's Check finds
// the grammar compiled and never stalls a step on a large schema.
//
// Ownership: owned by the step executor. Threading: Prepare from any thread (xgrammar's compiler
// and its cache are thread-safe; at most kMaxConcurrentCompiles at once, the rest wait);
// everything else from the worker's step thread only (mask filling may use xgrammar's own
// threads inside FillMasks).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/tokenizer/tokenizer.h"
#include "tessera/worker/v1/worker.pb.h"

namespace tessera::worker {

// The vocabulary as a grammar sees it: per token id, the bytes the token stands for, or "" for a
// token no grammar may produce (control tokens: a user cannot reach one through a grammar).
struct GrammarVocabulary {
  std::vector<std::string> token_bytes;
};
GrammarVocabulary GrammarVocabularyOf(const tokenizer::Tokenizer& tokenizer);

inline constexpr int kMaxConcurrentCompiles = 2;

class SlotGrammars {
 public:
  // vocab_size: the logits' width (>= the vocabulary's size; ids past it are never allowed).
  SlotGrammars(const GrammarVocabulary& vocabulary, int vocab_size, int max_num_seqs);
  ~SlotGrammars();
  SlotGrammars(const SlotGrammars&) = delete;
  SlotGrammars& operator=(const SlotGrammars&) = delete;

  int vocab_size() const { return vocab_size_; }
  // 32-bit words in one mask: ceil(vocab_size / 32).
  int mask_words() const { return mask_words_; }

  // Compiles `grammar` into the cache (any thread). INVALID_ARGUMENT as Check.
  absl::Status Prepare(const tessera::worker::v1::Grammar& grammar);

  // Compiles (or finds in the cache) `grammar` and replays `generated` (a re-admitted sequence's
  // earlier output) on a scratch matcher. INVALID_ARGUMENT with the reason for a grammar the
  // compiler refuses, a stop token outside the vocabulary, or a generated token it rejects.
  absl::Status Check(const tessera::worker::v1::Grammar& grammar,
                     std::span<const int32_t> generated);
  // Starts `slot`'s matcher and replays `generated`.
  // Preconditions (abort otherwise): slot in range and not started; Check(grammar, generated).
  void Begin(int slot, const tessera::worker::v1::Grammar& grammar,
             std::span<const int32_t> generated);
  void End(int slot);  // no-op for a slot without a grammar
  bool active(int slot) const;
  // Active and not terminated: its next token has a mask (a terminated grammar constrains
  // nothing more; Mask is then empty).
  bool constrains(int slot) const;

  // Fills the masks of `slots` (each active) for their next token; Mask(slot) reads one.
  void FillMasks(std::span<const int32_t> slots);
  // The slot's last filled mask, or empty when its matcher has terminated (no constraint left).
  std::span<const uint32_t> Mask(int slot) const;
  // Advances the slot's matcher by the token it sampled (no-op once terminated). A token outside
  // the mask it was sampled under is a broken invariant: abort.
  void Accept(int slot, int32_t token);

 private:
  struct State;
  int vocab_size_ = 0;
  int mask_words_ = 0;
  std::unique_ptr<State> state_;
};

}  // namespace tessera::worker
