// Byte-level BPE tokenizer (GGUF `tokenizer.ggml.model = gpt2`, or a HF tokenizer.json of type
// BPE with a ByteLevel pre-tokenizer/decoder).
//
// Encode: special/added tokens are matched first (longest match, left to right), each remaining
// span is split by the pre-tokenizer regex (PCRE2, UTF + UCP), mapped to byte-level symbols and
// merged by BPE rank. Decode maps tokens back to bytes.
//
// Ownership/threading: immutable after construction; Encode/Decode may run concurrently from any
// thread (internal caches, if any, are synchronized).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"

namespace tessera::tokenizer {

using TokenId = int32_t;

// GGUF token types (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct TokenizerInfo {
  std::string model;            // "gpt2"
  std::string pre_tokenizer;    // "smollm", "gpt2", "llama3", "qwen2", ... as GGUF names it
  int32_t vocab_size = 0;
  int32_t num_merges = 0;
  int32_t num_special = 0;      // control + user-defined tokens matched before BPE
  TokenId bos_id = -1;          // -1 when absent
  TokenId eos_id = -1;
  TokenId pad_id = -1;
  TokenId unk_id = -1;
  bool add_bos = false;         // prepend BOS when EncodeOptions::add_special is set
  bool add_eos = false;
};

struct EncodeOptions {
  bool add_special = true;      // add BOS/EOS as the tokenizer's add_bos/add_eos say
  bool parse_special = true;    // match special tokens in the text (false: treat them as text)
};

// One piece of a prompt assembled from trusted markup and untrusted text (EncodeSegments).
struct TextSegment {
  std::string_view text;
  // true: control tokens spelled in `text` become their ids (a template's own markers);
  // false: `text` is data, control-token spellings in it are encoded as ordinary text.
  bool parse_special = false;
};

struct DecodeOptions {
  bool skip_special = false;    // drop control tokens (BOS/EOS/<|im_start|> ...) from the output
};

class Tokenizer {
 public:
  // INVALID_ARGUMENT naming the key for missing/inconsistent tokenizer metadata;
  // UNIMPLEMENTED naming the model or pre-tokenizer when it is not supported.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const gguf::GgufFile& file);
  // A HF tokenizer.json (model.type == "BPE", byte-level). Same error rules.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromHfJson(const std::string& path);

  virtual ~Tokenizer() = default;

  virtual const TokenizerInfo& info() const = 0;
  virtual std::vector<TokenId> Encode(std::string_view text, const EncodeOptions& options) const = 0;
  // Encodes the concatenation of `segments` as Encode would, except that control tokens are only
  // matched inside segments with parse_special set (options.parse_special is ignored). Ordinary
  // text runs across segment boundaries, so when no untrusted segment spells a control token the
  // ids equal Encode(concatenation, {parse_special = true}).
  virtual std::vector<TokenId> EncodeSegments(std::span<const TextSegment> segments,
                                              const EncodeOptions& options) const = 0;
  // INVALID_ARGUMENT naming the first id outside [0, vocab_size).
  virtual absl::StatusOr<std::string> Decode(std::span<const TokenId> ids,
                                             const DecodeOptions& options) const = 0;
  // The raw bytes one token stands for (special tokens: their text). Precondition: valid id.
  virtual std::string TokenBytes(TokenId id) const = 0;
  virtual std::string_view TokenText(TokenId id) const = 0;       // as stored in the vocab
  virtual TokenType GetTokenType(TokenId id) const = 0;
  virtual std::optional<TokenId> FindToken(std::string_view text) const = 0;  // exact vocab entry
};

}  // namespace tessera::tokenizer
