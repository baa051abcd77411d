#include "common/tokenizer/bpe_tokenizer.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/tokenizer/byte_level.h"
#include "common/util/absl_compat.h"

namespace tessera::tokenizer {
namespace {

absl::Status CheckOptionalId(TokenId id, std::string_view key, size_t vocab_size) {
  if (id == -1 || (id >= 0 && static_cast<size_t>(id) < vocab_size)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(util::ToAbsl(key), " = ", id, " is outside the vocabulary [0, ", vocab_size, ")"));
}

// Tokens whose stored text is the literal text they stand for (not byte-level symbols).
bool IsLiteralType(TokenType type) {
  return type == TokenType::kControl || type == TokenType::kUserDefined ||
         type == TokenType::kUnknown;
}

}  // namespace

void BpeTokenizer::CheckId(TokenId id) const {
  if (id >= 0 && id < info_.vocab_size) return;
  // A caller bug, not bad input (Decode validates untrusted ids): abort loudly.
  std::fprintf(stderr, "tessera::tokenizer: token id %d outside the vocabulary [0, %d)\n", id,
               info_.vocab_size);
  std::abort();
}

absl::Status ValidateBpeSpec(const BpeSpec& spec) {
  if (spec.model != "gpt2") {
    return absl::UnimplementedError(absl::StrCat(
        "unsupported tokenizer model (tokenizer.ggml.model) '", spec.model, "'; supported: gpt2"));
  }
  if (spec.tokens.empty()) return absl::InvalidArgumentError("tokenizer.ggml.tokens is empty");
  if (spec.token_types.size() != spec.tokens.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer.ggml.token_type has ", spec.token_types.size(),
                     " entries but tokenizer.ggml.tokens has ", spec.tokens.size()));
  }
  for (size_t i = 0; i < spec.token_types.size(); ++i) {
    const auto type = static_cast<int32_t>(spec.token_types[i]);
    if (type < 0 || type > static_cast<int32_t>(TokenType::kByte)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer.ggml.token_type[", i, "] = ", type, " is not a token type"));
    }
  }
  const size_t n = spec.tokens.size();
  for (auto [id, key] : {std::pair{spec.bos_id, "tokenizer.ggml.bos_token_id"},
                         std::pair{spec.eos_id, "tokenizer.ggml.eos_token_id"},
                         std::pair{spec.pad_id, "tokenizer.ggml.padding_token_id"},
                         std::pair{spec.unk_id, "tokenizer.ggml.unknown_token_id"}}) {
    if (absl::Status status = CheckOptionalId(id, key, n); !status.ok()) return status;
  }
  if (spec.add_bos && spec.bos_id < 0) {
    return absl::InvalidArgumentError(
        "tokenizer.ggml.add_bos_token is set but tokenizer.ggml.bos_token_id is absent");
  }
  if (spec.unknown_bytes_to_unk && spec.unk_id < 0) {
    return absl::InvalidArgumentError(
        "unknown bytes are to become the unknown token, but tokenizer.ggml.unknown_token_id is "
        "absent");
  }
  if (spec.add_eos && spec.eos_id < 0) {
    return absl::InvalidArgumentError(
        "tokenizer.ggml.add_eos_token is set but tokenizer.ggml.eos_token_id is absent");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::Create(BpeSpec spec,
                                                                   const Options& options) {
  auto tokenizer = std::unique_ptr<BpeTokenizer>(new BpeTokenizer());
  if (absl::Status status = tokenizer->Init(std::move(spec), options); !status.ok()) return status;
  return tokenizer;
}

absl::Status BpeTokenizer::Init(BpeSpec spec, const Options& options) {
  if (absl::Status status = ValidateBpeSpec(spec); !status.ok()) return status;
  BpeModel::Options model_options{.unk_id = spec.unknown_bytes_to_unk ? spec.unk_id : -1,
                                  .ignore_merges = spec.ignore_merges,
                                  .cache_capacity = options.word_cache_capacity,
                                  .max_small_word = options.max_small_word};
  std::vector<std::string> regexes = spec.pre_regexes;
  if (regexes.empty()) {
    absl::StatusOr<PreTokenizerConfig> config = LookupPreTokenizer(spec.pre_tokenizer);
    if (!config.ok()) return config.status();
    regexes = std::move(config->regexes);
    model_options.ignore_merges = model_options.ignore_merges || config->ignore_merges;
  }
  absl::StatusOr<std::unique_ptr<PreTokenizer>> pre = PreTokenizer::Create(regexes);
  if (!pre.ok()) return pre.status();
  pre_tokenizer_ = std::move(*pre);
  absl::StatusOr<std::unique_ptr<BpeModel>> model =
      BpeModel::Create(spec.tokens, spec.merges, model_options);
  if (!model.ok()) return model.status();
  model_ = std::move(*model);

  token_bytes_.reserve(spec.tokens.size());
  int32_t num_special = 0;
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    const std::string& text = spec.tokens[id];
    const TokenType type = spec.token_types[id];
    std::optional<std::string> bytes;
    if (!IsLiteralType(type)) bytes = ByteLevelToBytes(text);
    // Text outside the byte-level alphabet can only stand for itself.
    token_bytes_.push_back(bytes ? std::move(*bytes) : text);
    if (type == TokenType::kControl || type == TokenType::kUserDefined) ++num_special;
    if (IsLiteralType(type) && !text.empty()) {
      special_tokens_.Add(text, static_cast<TokenId>(id), type != TokenType::kUserDefined);
    }
  }
  info_ = TokenizerInfo{.model = spec.model,
                        .pre_tokenizer = spec.pre_tokenizer,
                        .vocab_size = static_cast<int32_t>(spec.tokens.size()),
                        .num_merges = model_->num_merges(),
                        .num_special = num_special,
                        .bos_id = spec.bos_id,
                        .eos_id = spec.eos_id,
                        .pad_id = spec.pad_id,
                        .unk_id = spec.unk_id,
                        .add_bos = spec.add_bos,
                        .add_eos = spec.add_eos};
  spec_ = std::move(spec);
  return absl::OkStatus();
}

std::vector<TokenId> BpeTokenizer::Encode(std::string_view text,
                                          const EncodeOptions& options) const {
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 4);
  if (options.add_special && info_.add_bos) ids.push_back(info_.bos_id);
  size_t pos = 0;
  while (pos < text.size()) {
    std::optional<SpecialTokenMatcher::Match> match =
        special_tokens_.FindNext(text, pos, options.parse_special);
    const size_t end = match ? match->begin : text.size();
    EncodeOrdinary(text.substr(pos, end - pos), &ids);
    if (!match) break;
    ids.push_back(match->id);
    pos = match->begin + match->length;
  }
  if (options.add_special && info_.add_eos) ids.push_back(info_.eos_id);
  return ids;
}

std::vector<TokenId> BpeTokenizer::EncodeSegments(std::span<const TextSegment> segments,
                                                  const EncodeOptions& options) const {
  std::vector<TokenId> ids;
  if (options.add_special && info_.add_bos) ids.push_back(info_.bos_id);
  // Ordinary text waits here until a special token (or the end) closes it, so BPE sees the same
  // pieces as it would in the concatenated string.
  std::string ordinary;
  for (const TextSegment& segment : segments) {
    const std::string_view text = segment.text;
    size_t pos = 0;
    while (pos < text.size()) {
      std::optional<SpecialTokenMatcher::Match> match =
          special_tokens_.FindNext(text, pos, segment.parse_special);
      const size_t end = match ? match->begin : text.size();
      ordinary.append(text.substr(pos, end - pos));
      if (!match) break;
      EncodeOrdinary(ordinary, &ids);
      ordinary.clear();
      ids.push_back(match->id);
      pos = match->begin + match->length;
    }
  }
  EncodeOrdinary(ordinary, &ids);
  if (options.add_special && info_.add_eos) ids.push_back(info_.eos_id);
  return ids;
}

void BpeTokenizer::EncodeOrdinary(std::string_view text, std::vector<TokenId>* ids) const {
  if (text.empty()) return;
  std::vector<std::string_view> pieces;
  pre_tokenizer_->Split(text, &pieces);
  for (std::string_view piece : pieces) model_->EncodeWord(piece, ids);
}

absl::StatusOr<std::string> BpeTokenizer::Decode(std::span<const TokenId> ids,
                                                 const DecodeOptions& options) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const TokenId id = ids[i];
    if (id < 0 || id >= info_.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("token at index ", i, " has id ", id,
                                                     ", outside the vocabulary [0, ",
                                                     info_.vocab_size, ")"));
    }
    if (options.skip_special && spec_.token_types[id] == TokenType::kControl) continue;
    out += token_bytes_[id];
  }
  return out;
}

std::string BpeTokenizer::TokenBytes(TokenId id) const {
  CheckId(id);
  return token_bytes_[id];
}

std::string_view BpeTokenizer::TokenText(TokenId id) const {
  CheckId(id);
  return spec_.tokens[id];
}

TokenType BpeTokenizer::GetTokenType(TokenId id) const {
  CheckId(id);
  return spec_.token_types[id];
}

std::optional<TokenId> BpeTokenizer::FindToken(std::string_view text) const {
  return model_->FindToken(text);
}

}  // namespace tessera::tokenizer
