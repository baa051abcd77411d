// Pre-tokenization: splits text into the pieces BPE merges within, by a sequence of regexes.
//
// Semantics (llama.cpp's unicode_regex_split, and HF's Split(behavior = "Isolated")): stage 0
// splits the whole text; every later stage splits each piece of the previous stage on its own.
// Within a piece, every regex match is a piece, and every stretch between matches is a piece too,
// so no byte is ever dropped. An empty match only marks a boundary.
//
// Regexes are PCRE2 (UTF + UCP), compiled once (JIT when available). `\s` is widened to also
// match U+0085 (NEL), which llama.cpp's and Oniguruma's `\s` match but PCRE2's does not.
//
// Invalid UTF-8: patterns are compiled with PCRE2_MATCH_INVALID_UTF, so ill-formed bytes never
// match anything; they end up in the "between matches" stretches and reach BPE as raw bytes
// (encoded as byte tokens), so Decode(Encode(text)) == text holds for any byte string.
//
// Threading: immutable after Create; Split may run concurrently (match data is per call).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

// PCRE2's match-data type (pcre2.h is kept out of this header).
struct pcre2_real_match_data_8;
typedef struct pcre2_real_match_data_8 pcre2_match_data_8;

namespace tessera::tokenizer {

// What a GGUF `tokenizer.ggml.pre` name implies, as llama.cpp (src/llama-vocab.cpp) defines it.
struct PreTokenizerConfig {
  std::vector<std::string> regexes;  // applied in sequence, see above
  bool ignore_merges = false;        // a word that is a whole vocab entry skips merging (llama3)
  bool default_add_bos = false;      // add_bos when tokenizer.ggml.add_bos_token is absent
};

// UNIMPLEMENTED naming the pre-tokenizer when it is not one we support.
absl::StatusOr<PreTokenizerConfig> LookupPreTokenizer(std::string_view pre_name);

// The GPT-2 split regex, as llama.cpp writes it (HF's ByteLevel adds a trailing `|\s+`, which
// gives the same pieces under the keep-the-gaps semantics above).
inline constexpr std::string_view kGpt2SplitRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
inline constexpr std::string_view kDigitSplitRegex = R"(\p{N})";

// Rewrites `\s`/`\S` to include U+0085 (see above); other syntax is passed through unchanged.
std::string WidenWhitespaceClass(std::string_view pattern);

class PreTokenizer {
 public:
  // INVALID_ARGUMENT with PCRE2's message and offset for a regex that does not compile.
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> Create(
      const std::vector<std::string>& regexes);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Appends the pieces of `text` (views into it, non-empty, in order, covering it exactly).
  void Split(std::string_view text, std::vector<std::string_view>* pieces) const;

  size_t num_stages() const { return stages_.size(); }

 private:
  struct Stage;
  PreTokenizer() = default;
  // `match_data` is scratch space owned by the calling Split (one per call: thread-safe).
  static void SplitStage(const Stage& stage, std::string_view text, pcre2_match_data_8* match_data,
                         std::vector<std::string_view>* pieces);

  std::vector<std::unique_ptr<Stage>> stages_;
};

}  // namespace tessera::tokenizer
