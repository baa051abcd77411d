#include "common/tokenizer/bpe_trainer.h"

#include <cstdint>
#include <memory>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/tokenizer/byte_level.h"
#include "common/tokenizer/pre_tokenizer.h"
#include "common/tokenizer/special_tokens.h"

namespace tessera::tokenizer {
namespace {

struct Word {
  std::vector<TokenId> symbols;
  int64_t count = 0;
};

uint64_t PairKey(TokenId left, TokenId right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// Distinct pre-tokenized words of the corpus (special tokens cut out) with their counts, as
// sequences of byte-symbol ids (byte b has id first_byte_id + b).
absl::StatusOr<std::vector<Word>> CollectWords(std::string_view corpus,
                                               const std::vector<std::string>& special_tokens,
                                               TokenId first_byte_id) {
  SpecialTokenMatcher specials;
  for (size_t i = 0; i < special_tokens.size(); ++i) {
    specials.Add(special_tokens[i], static_cast<TokenId>(i), /*is_control=*/true);
  }
  absl::StatusOr<PreTokenizerConfig> config = LookupPreTokenizer("smollm");
  if (!config.ok()) return config.status();
  absl::StatusOr<std::unique_ptr<PreTokenizer>> pre = PreTokenizer::Create(config->regexes);
  if (!pre.ok()) return pre.status();

  std::vector<std::string_view> pieces;
  for (size_t pos = 0; pos < corpus.size();) {
    auto match = specials.FindNext(corpus, pos, /*include_control=*/true);
    const size_t end = match ? match->begin : corpus.size();
    (*pre)->Split(corpus.substr(pos, end - pos), &pieces);
    pos = match ? match->begin + match->length : corpus.size();
  }
  absl::flat_hash_map<std::string_view, int64_t> counts;
  for (std::string_view piece : pieces) ++counts[piece];
  std::vector<Word> words;
  words.reserve(counts.size());
  for (const auto& [piece, count] : counts) {
    Word word;
    word.count = count;
    for (char c : piece) word.symbols.push_back(first_byte_id + static_cast<uint8_t>(c));
    words.push_back(std::move(word));
  }
  return words;
}

// The most frequent adjacent pair (count >= 2), or false when there is none.
bool BestPair(const std::vector<Word>& words, const std::vector<std::string>& tokens, TokenId* left,
              TokenId* right) {
  absl::flat_hash_map<uint64_t, int64_t> pair_counts;
  for (const Word& word : words) {
    for (size_t i = 0; i + 1 < word.symbols.size(); ++i) {
      pair_counts[PairKey(word.symbols[i], word.symbols[i + 1])] += word.count;
    }
  }
  bool found = false;
  int64_t best_count = 0;
  for (const auto& [key, count] : pair_counts) {
    const auto l = static_cast<TokenId>(key >> 32);
    const auto r = static_cast<TokenId>(key & 0xFFFFFFFF);
    if (count < 2 || count < best_count) continue;
    if (found && count == best_count &&
        !(std::tie(tokens[l], tokens[r]) < std::tie(tokens[*left], tokens[*right]))) {
      continue;
    }
    best_count = count;
    found = true;
    *left = l;
    *right = r;
  }
  return found;
}

void ApplyMerge(TokenId left, TokenId right, TokenId result, std::vector<Word>* words) {
  for (Word& word : *words) {
    std::vector<TokenId>& s = word.symbols;
    size_t out = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (i + 1 < s.size() && s[i] == left && s[i + 1] == right) {
        s[out++] = result;
        ++i;
      } else {
        s[out++] = s[i];
      }
    }
    s.resize(out);
  }
}

absl::Status CheckSpecialTokens(const std::vector<std::string>& special_tokens) {
  absl::flat_hash_set<std::string_view> seen;
  for (const std::string& token : special_tokens) {
    if (token.empty()) return absl::InvalidArgumentError("empty special token");
    if (!seen.insert(token).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate special token '", token, "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BpeSpec> TrainByteLevelBpe(std::string_view corpus, int num_merges,
                                          std::vector<std::string> special_tokens) {
  if (num_merges < 0) return absl::InvalidArgumentError("num_merges must be >= 0");
  if (absl::Status status = CheckSpecialTokens(special_tokens); !status.ok()) return status;
  BpeSpec spec;
  spec.model = "gpt2";
  spec.pre_tokenizer = "smollm";
  const auto num_special = static_cast<TokenId>(special_tokens.size());
  spec.tokens = std::move(special_tokens);
  spec.token_types.assign(spec.tokens.size(), TokenType::kControl);
  for (int byte = 0; byte < 256; ++byte) {
    spec.tokens.push_back(BytesToByteLevel(std::string(1, static_cast<char>(byte))));
    spec.token_types.push_back(TokenType::kNormal);
  }
  absl::StatusOr<std::vector<Word>> words = CollectWords(
      corpus, std::vector<std::string>(spec.tokens.begin(), spec.tokens.begin() + num_special),
      num_special);
  if (!words.ok()) return words.status();

  absl::flat_hash_map<std::string, TokenId> token_ids;
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    token_ids.emplace(spec.tokens[id], static_cast<TokenId>(id));
  }
  for (int m = 0; m < num_merges; ++m) {
    TokenId left = -1;
    TokenId right = -1;
    if (!BestPair(*words, spec.tokens, &left, &right)) break;
    std::string merged = spec.tokens[left] + spec.tokens[right];
    spec.merges.push_back(absl::StrCat(spec.tokens[left], " ", spec.tokens[right]));
    auto [it, inserted] = token_ids.emplace(merged, static_cast<TokenId>(spec.tokens.size()));
    if (inserted) {
      spec.tokens.push_back(std::move(merged));
      spec.token_types.push_back(TokenType::kNormal);
    }
    ApplyMerge(left, right, it->second, &*words);
  }
  if (num_special > 0) {
    spec.bos_id = 0;
    spec.eos_id = spec.pad_id = num_special > 1 ? 1 : 0;
  }
  return spec;
}

}  // namespace tessera::tokenizer
