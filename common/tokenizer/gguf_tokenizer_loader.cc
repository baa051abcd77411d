#include "common/tokenizer/gguf_tokenizer_loader.h"

#include <limits>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/tokenizer/bpe_tokenizer.h"
#include "common/tokenizer/pre_tokenizer.h"
#include "common/util/absl_compat.h"

namespace tessera::tokenizer {
namespace {

constexpr char kModelKey[] = "tokenizer.ggml.model";
constexpr char kPreKey[] = "tokenizer.ggml.pre";
constexpr char kTokensKey[] = "tokenizer.ggml.tokens";
constexpr char kTokenTypeKey[] = "tokenizer.ggml.token_type";
constexpr char kMergesKey[] = "tokenizer.ggml.merges";

// A required key that is absent is bad model data (INVALID_ARGUMENT), not a missing resource.
template <typename T>
absl::StatusOr<T> Required(absl::StatusOr<T> value, std::string_view key) {
  if (value.ok() || !absl::IsNotFound(value.status())) return value;
  return absl::InvalidArgumentError(absl::StrCat("missing required GGUF key ", util::ToAbsl(key)));
}

// An optional key: nullopt when absent, an error when present with the wrong type.
template <typename T>
absl::StatusOr<std::optional<T>> Optional(
    const gguf::GgufFile& file, std::string_view key,
    absl::StatusOr<T> (gguf::GgufFile::*getter)(std::string_view) const) {
  if (!file.HasKey(key)) return std::optional<T>();
  absl::StatusOr<T> value = (file.*getter)(key);
  if (!value.ok()) return value.status();
  return std::optional<T>(std::move(*value));
}

absl::Status ReadSpecialId(const gguf::GgufFile& file, std::string_view key, TokenId* id) {
  absl::StatusOr<std::optional<int64_t>> value = Optional(file, key, &gguf::GgufFile::GetInt);
  if (!value.ok()) return value.status();
  if (!value->has_value()) return absl::OkStatus();
  if (**value < 0 || **value > std::numeric_limits<TokenId>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(util::ToAbsl(key), " = ", **value, " is not a token id"));
  }
  *id = static_cast<TokenId>(**value);
  return absl::OkStatus();
}

absl::Status ReadTokenTypes(const gguf::GgufFile& file, BpeSpec* spec) {
  absl::StatusOr<std::optional<std::vector<int64_t>>> types =
      Optional(file, kTokenTypeKey, &gguf::GgufFile::GetIntArray);
  if (!types.ok()) return types.status();
  if (!types->has_value()) {
    spec->token_types.assign(spec->tokens.size(), TokenType::kNormal);
    return absl::OkStatus();
  }
  spec->token_types.reserve((*types)->size());
  for (size_t i = 0; i < (*types)->size(); ++i) {
    const int64_t type = (**types)[i];
    if (type < 0 || type > static_cast<int64_t>(TokenType::kByte)) {
      return absl::InvalidArgumentError(
          absl::StrCat(kTokenTypeKey, "[", i, "] = ", type, " is not a token type"));
    }
    spec->token_types.push_back(static_cast<TokenType>(type));
  }
  return absl::OkStatus();
}

absl::Status ReadFlags(const gguf::GgufFile& file, bool default_add_bos, BpeSpec* spec) {
  absl::StatusOr<std::optional<bool>> add_bos =
      Optional(file, "tokenizer.ggml.add_bos_token", &gguf::GgufFile::GetBool);
  if (!add_bos.ok()) return add_bos.status();
  spec->add_bos = add_bos->value_or(default_add_bos && spec->bos_id >= 0);
  absl::StatusOr<std::optional<bool>> add_eos =
      Optional(file, "tokenizer.ggml.add_eos_token", &gguf::GgufFile::GetBool);
  if (!add_eos.ok()) return add_eos.status();
  spec->add_eos = add_eos->value_or(false);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BpeSpec> ReadBpeSpecFromGguf(const gguf::GgufFile& file) {
  BpeSpec spec;
  absl::StatusOr<std::string> model = Required(file.GetString(kModelKey), kModelKey);
  if (!model.ok()) return model.status();
  spec.model = *std::move(model);
  if (spec.model != "gpt2") {  // before reading arrays whose meaning depends on the model
    return absl::UnimplementedError(absl::StrCat("unsupported tokenizer model (", kModelKey, ") '",
                                                 spec.model, "'; supported: gpt2"));
  }
  absl::StatusOr<std::optional<std::string>> pre =
      Optional(file, kPreKey, &gguf::GgufFile::GetString);
  if (!pre.ok()) return pre.status();
  spec.pre_tokenizer = pre->value_or("default");
  absl::StatusOr<PreTokenizerConfig> pre_config = LookupPreTokenizer(spec.pre_tokenizer);
  if (!pre_config.ok()) return pre_config.status();

  absl::StatusOr<std::vector<std::string>> tokens =
      Required(file.GetStringArray(kTokensKey), kTokensKey);
  if (!tokens.ok()) return tokens.status();
  spec.tokens = *std::move(tokens);
  if (absl::Status status = ReadTokenTypes(file, &spec); !status.ok()) return status;
  absl::StatusOr<std::vector<std::string>> merges =
      Required(file.GetStringArray(kMergesKey), kMergesKey);
  if (!merges.ok()) return merges.status();
  spec.merges = *std::move(merges);

  for (auto [key, id] : {std::pair{"tokenizer.ggml.bos_token_id", &spec.bos_id},
                         std::pair{"tokenizer.ggml.eos_token_id", &spec.eos_id},
                         std::pair{"tokenizer.ggml.padding_token_id", &spec.pad_id},
                         std::pair{"tokenizer.ggml.unknown_token_id", &spec.unk_id}}) {
    if (absl::Status status = ReadSpecialId(file, key, id); !status.ok()) return status;
  }
  if (absl::Status status = ReadFlags(file, pre_config->default_add_bos, &spec); !status.ok()) {
    return status;
  }
  return spec;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const gguf::GgufFile& file) {
  absl::StatusOr<BpeSpec> spec = ReadBpeSpecFromGguf(file);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> tokenizer = BpeTokenizer::Create(*std::move(spec));
  if (!tokenizer.ok()) return tokenizer.status();
  return std::unique_ptr<Tokenizer>(std::move(*tokenizer));
}

}  // namespace tessera::tokenizer
