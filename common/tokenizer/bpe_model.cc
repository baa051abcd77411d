#include "common/tokenizer/bpe_model.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/tokenizer/byte_level.h"
#include "common/util/absl_compat.h"

namespace tessera::tokenizer {
namespace {

// Only short words are cached: they repeat (" the", " and"), long ones rarely do.
constexpr size_t kMaxCachedWordBytes = 32;

uint64_t PairKey(TokenId left, TokenId right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// A candidate merge of the symbols at `left` and `right`. It is stale (skipped when popped) once
// either side has been merged into something else, detected by the ids no longer matching.
struct Candidate {
  int32_t rank;
  int32_t left;
  int32_t right;
  TokenId left_id;
  TokenId right_id;
  TokenId result;
  bool operator>(const Candidate& other) const {
    return rank != other.rank ? rank > other.rank : left > other.left;  // leftmost wins ties
  }
};

struct Symbol {
  TokenId id;
  int32_t prev;  // -1 at the start of the word
  int32_t next;  // -1 at the end of the word
};

}  // namespace

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::Create(const std::vector<std::string>& tokens,
                                                           const std::vector<std::string>& merges,
                                                           const Options& options) {
  auto model = std::unique_ptr<BpeModel>(new BpeModel());
  model->options_ = options;
  model->options_.max_small_word = std::min(options.max_small_word, kMaxSmallWordCapacity);
  model->cache_ = std::make_unique<WordCache>(options.cache_capacity);
  if (absl::Status status = model->IndexTokens(tokens); !status.ok()) return status;
  if (absl::Status status = model->IndexMerges(merges); !status.ok()) return status;
  return model;
}

absl::Status BpeModel::IndexTokens(const std::vector<std::string>& tokens) {
  token_to_id_.reserve(tokens.size());
  for (size_t id = 0; id < tokens.size(); ++id) {
    token_to_id_.emplace(tokens[id], static_cast<TokenId>(id));  // first id wins
  }
  for (int byte = 0; byte < 256; ++byte) {
    const std::string symbol = BytesToByteLevel(std::string(1, static_cast<char>(byte)));
    const std::optional<TokenId> id = FindToken(symbol);
    byte_tokens_[byte] = id.value_or(kMissingByte);
    num_missing_bytes_ += !id.has_value();
  }
  // Some missing bytes are normal; none present means the vocab is not byte-level at all, and
  // every input would silently encode to nothing.
  if (num_missing_bytes_ == 256) {
    return absl::InvalidArgumentError(
        "tokenizer.ggml.tokens: no byte-level symbol (e.g. 'a', '\xC4\xA0' for space) is in the "
        "vocabulary; is this a byte-level BPE vocabulary?");
  }
  return absl::OkStatus();
}

absl::Status BpeModel::IndexMerges(const std::vector<std::string>& merges) {
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& merge = merges[rank];
    const size_t space = merge.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == merge.size() ||
        merge.find(' ', space + 1) != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer.ggml.merges[", rank, "] '", merge,
                                                     "' is not two tokens separated by a space"));
    }
    const std::string_view left(merge.data(), space);
    const std::string_view right = std::string_view(merge).substr(space + 1);
    const std::string merged = std::string(left) + std::string(right);
    for (std::string_view part : {left, right, std::string_view(merged)}) {
      if (!FindToken(part)) {
        return absl::InvalidArgumentError(absl::StrCat("tokenizer.ggml.merges[", rank, "] '", merge,
                                                       "': '", util::ToAbsl(part),
                                                       "' is not in the vocabulary"));
      }
    }
    merges_.emplace(PairKey(*FindToken(left), *FindToken(right)),
                    MergeEntry{static_cast<int32_t>(rank), *FindToken(merged)});  // first wins
  }
  return absl::OkStatus();
}

std::optional<TokenId> BpeModel::FindToken(std::string_view text) const {
  auto it = token_to_id_.find(util::ToAbsl(text));
  if (it == token_to_id_.end()) return std::nullopt;
  return it->second;
}

const BpeModel::MergeEntry* BpeModel::FindMerge(TokenId left, TokenId right) const {
  if (left < 0 || right < 0) return nullptr;
  auto it = merges_.find(PairKey(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::EncodeWord(std::string_view word, std::vector<TokenId>* out) const {
  if (word.empty()) return;
  if (word.size() == 1) {
    EmitSymbol(byte_tokens_[static_cast<uint8_t>(word[0])], out);
    return;
  }
  if (options_.ignore_merges) {
    if (auto id = FindToken(BytesToByteLevel(word))) {
      out->push_back(*id);
      return;
    }
  }
  const bool cacheable = cache_->enabled() && word.size() <= kMaxCachedWordBytes;
  if (cacheable && cache_->Lookup(word, out)) return;
  const size_t first = out->size();
  if (word.size() <= options_.max_small_word) {
    MergeSmallWord(word, out);
  } else {
    MergeWord(word, out);
  }
  if (cacheable) cache_->Store(word, std::span<const TokenId>(*out).subspan(first));
}

void BpeModel::MergeWord(std::string_view word, std::vector<TokenId>* out) const {
  const auto n = static_cast<int32_t>(word.size());
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i) {
    symbols[i] = Symbol{byte_tokens_[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1};
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    if (const MergeEntry* merge = FindMerge(symbols[left].id, symbols[right].id)) {
      queue.push({merge->rank, left, right, symbols[left].id, symbols[right].id, merge->result});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i, i + 1);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.left];
    Symbol& right = symbols[c.right];
    if (left.id != c.left_id || left.next != c.right || right.id != c.right_id) continue;
    left.id = c.result;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    right.id = kMissingByte - 1;  // dead: matches no candidate's ids again
    consider(left.prev, c.left);
    consider(c.left, left.next);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) EmitSymbol(symbols[i].id, out);
}

void BpeModel::MergeSmallWord(std::string_view word, std::vector<TokenId>* out) const {
  constexpr int32_t kNoMerge = std::numeric_limits<int32_t>::max();
  const auto n = static_cast<int32_t>(word.size());
  std::array<TokenId, kMaxSmallWordCapacity> ids;
  std::array<const MergeEntry*, kMaxSmallWordCapacity> pair_merge;  // merge of (i, i + 1)
  for (int32_t i = 0; i < n; ++i) ids[i] = byte_tokens_[static_cast<uint8_t>(word[i])];
  for (int32_t i = 0; i + 1 < n; ++i) pair_merge[i] = FindMerge(ids[i], ids[i + 1]);
  int32_t size = n;
  while (size > 1) {
    int32_t best = -1;
    int32_t best_rank = kNoMerge;
    for (int32_t i = 0; i + 1 < size; ++i) {
      if (pair_merge[i] != nullptr && pair_merge[i]->rank < best_rank) {
        best = i;  // strict '<': the leftmost of equal ranks wins
        best_rank = pair_merge[i]->rank;
      }
    }
    if (best < 0) break;
    ids[best] = pair_merge[best]->result;
    for (int32_t i = best + 1; i + 1 < size; ++i) {
      ids[i] = ids[i + 1];
      pair_merge[i] = pair_merge[i + 1];
    }
    --size;
    if (best > 0) pair_merge[best - 1] = FindMerge(ids[best - 1], ids[best]);
    if (best + 1 < size) pair_merge[best] = FindMerge(ids[best], ids[best + 1]);
  }
  for (int32_t i = 0; i < size; ++i) EmitSymbol(ids[i], out);
}

void BpeModel::EmitSymbol(TokenId id, std::vector<TokenId>* out) const {
  if (id != kMissingByte) {
    out->push_back(id);
  } else if (options_.unk_id >= 0) {
    out->push_back(options_.unk_id);
  }  // else dropped, like llama.cpp / HF
}

}  // namespace tessera::tokenizer
