// Generates a small random `llama` GGUF model so tests never need a download (or, with
// TinyModelOptions::arch, a `qwen2` / `qwen3` one: the same tensors plus Qwen2's Q/K/V biases or
// Qwen3's per-head Q/K RMSNorm weights, stored as trained for NeoX rotation).
//
// The file looks like a llama.cpp conversion of a SmolLM2-style model: the same metadata keys,
// tensor names and ggml dimension order, a real (tiny) byte-level BPE vocabulary and ChatML chat
// template (tiny_vocab.h). Weights are random but initialized at realistic scales (matrices
// ~N(0, 0.02), norm weights ~1), and tensor types are mixed so every one of F32, F16, Q8_0 and
// Q4_1 appears:
//   token_embd.weight   [hidden, vocab]       Q8_0
//   blk.N.attn_norm / ffn_norm [hidden]       F32
//   blk.N.attn_q/k/v/output                   Q4_1 in even layers, Q8_0 in odd layers
//     attn_q, attn_output [hidden, hidden]; attn_k, attn_v [hidden, kv_dim]
//   blk.N.ffn_gate/up [hidden, ffn], ffn_down [ffn, hidden]
//                                             F16 in even layers, Q4_1 in odd layers
//   output_norm.weight  [hidden]              F32
//   output.weight       [hidden, vocab]       F16, only when embeddings are untied
//   qwen2: blk.N.attn_q/k/v.bias [q or kv dim]  F32 ~N(0, 0.1)
//   qwen3: blk.N.attn_q_norm/k_norm.weight [head_dim]  F32 ~N(1, 0.02)
// (dims in ggml order: dims[0] is the contiguous input-feature dimension.)
//
// Deterministic: the same options give a byte-identical file on every run and platform (the
// random stream is std::mt19937_64, whose output the standard fixes, with our own normal
// transform; tiny_weights.h, shared with the hybrid writer tiny_hybrid_model.h).
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tools/convert/tiny_vocab.h"

namespace tessera::convert {

enum class TinyDenseArch { kLlama, kQwen2, kQwen3 };

std::string_view TinyDenseArchName(TinyDenseArch arch);  // "llama", "qwen2", "qwen3"
std::optional<TinyDenseArch> ParseTinyDenseArch(std::string_view name);

struct TinyModelOptions {
  TinyDenseArch arch = TinyDenseArch::kLlama;
  int num_layers = 2;
  int hidden = 64;       // multiple of 32 (the quantization block size)
  int num_heads = 4;     // divides hidden; head_dim = hidden / num_heads must be even (RoPE)
  int num_kv_heads = 2;  // divides num_heads (GQA)
  int ffn = 128;         // multiple of 32
  int context_length = 256;
  int num_merges = 200;  // BPE merges trained on the embedded corpus
  uint64_t seed = 1;
  bool tied_embeddings = true;  // true: no output.weight; the head reuses token_embd
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  TinyChatStyle chat_style = TinyChatStyle::kChatMl;  // special tokens + chat template
};

// OK, or INVALID_ARGUMENT naming the first bad field and its value.
absl::Status ValidateTinyModelOptions(const TinyModelOptions& options);

// The GGUF image in memory (for tests that want no file), or the validation error.
absl::StatusOr<std::vector<uint8_t>> BuildTinyLlamaGguf(const TinyModelOptions& options);

// Builds the model and writes it to `path` (replacing any file there).
absl::Status WriteTinyLlamaGguf(const TinyModelOptions& options, const std::string& path);

}  // namespace tessera::convert
