#include "common/tokenizer/pre_tokenizer.h"

#include "common/util/absl_compat.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/tokenizer/utf8.h"

namespace tessera::tokenizer {
namespace {

// Regexes copied from llama.cpp's llm_tokenizer_bpe (facts about the vocabularies, not code).
constexpr std::string_view kLlama3Regex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct NamedPreTokenizer {
  std::array<std::string_view, 8> names;  // aliases; unused slots are empty
  std::array<std::string_view, 4> regexes;
  bool ignore_merges;
  bool default_add_bos;
};

const NamedPreTokenizer kPreTokenizers[] = {
    {{"default"},
     {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2SplitRegex, R"(\p{N}+)", "[0-9][0-9][0-9]"},
     false,
     false},
    {{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"},
     {kDigitSplitRegex, kGpt2SplitRegex},
     false,
     false},
    {{"gpt2", "gpt-2", "phi-2", "roberta-bpe", "mpt", "olmo", "jais"},
     {kGpt2SplitRegex},
     false,
     false},
    {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "lfm2"},
     {kLlama3Regex},
     true,
     true},
    {{"dbrx", "smaug-bpe"}, {kLlama3Regex}, false, false},
    {{"qwen2", "stablelm2", "deepseek-r1-qwen", "megrez"}, {kQwen2Regex}, false, false},
};

std::string Pcre2ErrorMessage(int error_code) {
  std::array<PCRE2_UCHAR, 256> buffer{};
  pcre2_get_error_message(error_code, buffer.data(), buffer.size());
  return std::string(reinterpret_cast<const char*>(buffer.data()));
}

}  // namespace

absl::StatusOr<PreTokenizerConfig> LookupPreTokenizer(std::string_view pre_name) {
  std::vector<std::string> known;
  for (const NamedPreTokenizer& entry : kPreTokenizers) {
    for (std::string_view name : entry.names) {
      if (name.empty()) continue;
      known.emplace_back(name);
      if (name != pre_name) continue;
      PreTokenizerConfig config;
      for (std::string_view regex : entry.regexes) {
        if (!regex.empty()) config.regexes.emplace_back(regex);
      }
      config.ignore_merges = entry.ignore_merges;
      config.default_add_bos = entry.default_add_bos;
      return config;
    }
  }
  return absl::UnimplementedError(absl::StrCat("unsupported pre-tokenizer (tokenizer.ggml.pre) '",
                                               util::ToAbsl(pre_name),
                                               "'; supported: ", absl::StrJoin(known, ", ")));
}

std::string WidenWhitespaceClass(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        out += in_class ? R"(\s\x{85})" : R"([\s\x{85}])";
      } else if (next == 'S' && !in_class) {
        out += R"([^\s\x{85}])";
      } else {
        out += c;
        out += next;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const size_t end = pattern.find(":]", i + 2);  // POSIX class like [:alpha:]
      if (end != std::string_view::npos) {
        out.append(pattern.substr(i, end + 2 - i));
        i = end + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

struct PreTokenizer::Stage {
  pcre2_code* code = nullptr;
  ~Stage() { pcre2_code_free(code); }
};

PreTokenizer::~PreTokenizer() = default;

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::Create(
    const std::vector<std::string>& regexes) {
  auto pre_tokenizer = std::unique_ptr<PreTokenizer>(new PreTokenizer());
  for (const std::string& regex : regexes) {
    const std::string pattern = WidenWhitespaceClass(regex);
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    auto stage = std::make_unique<Stage>();
    stage->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code,
                                &error_offset, nullptr);
    if (stage->code == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("pre-tokenizer regex '", regex,
                                                     "' does not compile at offset ", error_offset,
                                                     ": ", Pcre2ErrorMessage(error_code)));
    }
    // JIT is an optimization only: when it is unavailable pcre2_match interprets the pattern.
    pcre2_jit_compile(stage->code, PCRE2_JIT_COMPLETE);
    pre_tokenizer->stages_.push_back(std::move(stage));
  }
  return pre_tokenizer;
}

void PreTokenizer::Split(std::string_view text, std::vector<std::string_view>* pieces) const {
  if (text.empty()) return;
  if (stages_.empty()) {
    pieces->push_back(text);
    return;
  }
  // One ovector pair is enough: only the whole-match offsets are used (rc == 0 then means
  // "match, but captures did not fit", which is fine).
  pcre2_match_data* match_data = pcre2_match_data_create(1, nullptr);
  std::vector<std::string_view> current{text};
  std::vector<std::string_view> next;
  for (size_t s = 0; s < stages_.size(); ++s) {
    std::vector<std::string_view>* out = s + 1 == stages_.size() ? pieces : &next;
    for (std::string_view piece : current) SplitStage(*stages_[s], piece, match_data, out);
    if (out == &next) {
      current.swap(next);
      next.clear();
    }
  }
  pcre2_match_data_free(match_data);
}

void PreTokenizer::SplitStage(const Stage& stage, std::string_view text,
                              pcre2_match_data* match_data, std::vector<std::string_view>* pieces) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t emitted = 0;  // text[0, emitted) is already in `pieces`
  size_t search = 0;
  while (search < text.size()) {
    const int rc = pcre2_match(stage.code, subject, text.size(), search, 0, match_data, nullptr);
    if (rc < 0) break;  // PCRE2_ERROR_NOMATCH, or a resource limit: the rest stays one piece
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data);
    const size_t begin = ovector[0];
    const size_t end = ovector[1];
    if (begin > emitted) pieces->push_back(text.substr(emitted, begin - emitted));
    if (end > begin) {
      pieces->push_back(text.substr(begin, end - begin));
      emitted = search = end;
    } else {
      // Empty match: a boundary only. Step over one character so the search makes progress.
      emitted = begin;
      if (begin >= text.size()) break;
      search = begin + DecodeUtf8At(text, begin).length;
    }
  }
  if (emitted < text.size()) pieces->push_back(text.substr(emitted));
}

}  // namespace tessera::tokenizer
