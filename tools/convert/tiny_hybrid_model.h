// Generates a small random hybrid Gated-DeltaNet GGUF (llama.cpp's `qwen35`, `qwen35moe` or
// `qwen3next`) so tests and CPU benchmarks of the hybrid path never need a download; the llama
// counterpart is tiny_model.h, and both share the vocabulary (tiny_vocab.h) and the random
// weights (tiny_weights.h).
//
// The file follows the conventions of llama.cpp's converter as tools/oracle/make_hybrid_fixtures.py
// documents them, and has every key and tensor common/model/hybrid_config.h and hybrid_tensors.h
// require:
//   metadata  {arch}.block_count, context_length, embedding_length, feed_forward_length (not for
//             qwen35moe), attention.head_count / head_count_kv / key_length / value_length /
//             layer_norm_rms_epsilon, rope.freq_base, rope.dimension_count (partial NeoX RoPE),
//             rope.dimension_sections (qwen35*: the rotated pairs split over the t/h/w axes),
//             full_attention_interval (layer i is attention when (i + 1) % interval == 0),
//             ssm.conv_kernel / state_size / group_count / time_step_rank / inner_size, and for
//             the MoE archs expert_count / expert_used_count / expert_feed_forward_length /
//             expert_shared_feed_forward_length; the tokenizer of tiny_vocab.h.
//   tensors   (ggml dims: dims[0] is the contiguous row; H hidden, D head_dim, Kd = k heads x
//             GDN head dim, Vd = v heads x GDN head dim, E experts, I expert ffn, S shared ffn)
//     token_embd [H, vocab], output_norm [H], output [H, vocab] (untied only)
//     every layer: attn_norm [H], post_attention_norm [H], then
//     attention layers: attn_q [H, 2 x heads x D] (per head [query | gate]), attn_k/attn_v
//       [H, kv_heads x D], attn_output [heads x D, H], attn_q_norm / attn_k_norm [D]
//     GDN layers: attn_qkv [H, 2 Kd + Vd], attn_gate [H, Vd], ssm_conv1d [conv_kernel, 2 Kd + Vd],
//       ssm_dt.bias [v heads], ssm_a [v heads], ssm_norm [GDN head dim], ssm_out [Vd, H], and
//       qwen3next: ssm_ba [H, 2 x v heads]; qwen35*: ssm_beta / ssm_alpha [H, v heads]
//     qwen35: ffn_gate / ffn_up [H, ffn], ffn_down [ffn, H]
//     qwen35moe / qwen3next: ffn_gate_inp [H, E], ffn_gate_exps / ffn_up_exps [H, I, E],
//       ffn_down_exps [I, H, E], ffn_gate_inp_shexp [H] (1-D), ffn_gate_shexp / ffn_up_shexp
//       [H, S], ffn_down_shexp [S, H]
// The value-head order (qwen35* tiled, qwen3next grouped) is a property of the architecture
// name: random weights have no HF order to permute.
//
// Values, at scales that keep activations finite through many layers: matrices ~N(0, 0.02);
// norms (stored with llama.cpp's +1 folded in) ~1 + N(0, 0.02), ssm_norm (stored as is) the
// same; ssm_a = -exp(A_log) with A_log ~ U(0, 2); ssm_dt.bias ~ U(-4, 0) (with the oracle's
// convention, decays spread over (0, 1)); ssm_conv1d ~ N(0, 0.3).
//
// Types: F32 throughout by default; TinyWeightType stores the matrices as F16, Q8_0 or Q4_1, or
// mixes them as the llama writer does. Quantized types apply only to matrices whose rows
// (dims[0]) are whole 32-element blocks; the others, 1-D tensors and ssm_conv1d stay F32.
//
// Deterministic: the same options give a byte-identical file (tiny_weights.h).
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

namespace tessera::convert {

enum class TinyHybridArch { kQwen35, kQwen35Moe, kQwen3Next };

std::string_view TinyHybridArchName(TinyHybridArch arch);  // "qwen35", "qwen35moe", "qwen3next"
std::optional<TinyHybridArch> ParseTinyHybridArch(std::string_view name);
bool TinyHybridArchHasExperts(TinyHybridArch arch);  // qwen35moe, qwen3next

enum class TinyWeightType {
  kF32,
  kF16,
  kQ8_0,
  kQ4_1,
  // As tiny_model.h mixes them: token_embd Q8_0, output F16; attention / GDN matrices Q4_1 in
  // even layers and Q8_0 in odd ones; FFN / expert matrices F16 in even layers, Q4_1 in odd.
  kMixed,
};

std::string_view TinyWeightTypeName(TinyWeightType type);  // "f32", "f16", "q8_0", "q4_1", "mixed"
std::optional<TinyWeightType> ParseTinyWeightType(std::string_view name);

struct TinyHybridOptions {
  TinyHybridArch arch = TinyHybridArch::kQwen35;
  int num_layers = 4;
  int full_attention_interval = 4;  // layers 0-2 GDN, layer 3 attention
  int hidden = 64;                  // multiple of 32
  // Gated attention.
  int num_heads = 4;
  int num_kv_heads = 2;  // divides num_heads
  int head_dim = 32;     // even
  int rope_dim = 8;      // even, at most head_dim: rotated dims per head (partial RoPE)
  // Gated DeltaNet. llama.cpp's value heads are as wide as its key heads, so one head width.
  int gdn_k_heads = 2;
  int gdn_v_heads = 4;  // multiple of gdn_k_heads
  int gdn_head_dim = 16;
  int conv_kernel = 4;
  // FFN: qwen35's dense SwiGLU width (qwen3next writes it as feed_forward_length too; its
  // forward uses the experts). qwen35moe ignores it.
  int ffn = 128;
  // Experts (qwen35moe, qwen3next; ignored for qwen35).
  int num_experts = 8;
  int num_experts_used = 2;  // at most num_experts
  int expert_ffn = 32;
  int shared_expert_ffn = 64;

  int context_length = 4096;
  int num_merges = 200;  // BPE merges trained on the embedded corpus (tiny_vocab.h)
  uint64_t seed = 1;
  bool tied_embeddings = true;  // true: no output.weight; the head reuses token_embd
  TinyWeightType weight_type = TinyWeightType::kF32;
  float rope_theta = 10000000.0f;
  float rms_eps = 1e-6f;
};

// The three M-RoPE section sizes qwen35* files carry: the rotated pairs (rope_dim / 2) dealt
// round-robin over the t, h and w axes, so no pair lands on the fourth axis ({2, 1, 1, 0} for 4
// pairs; {11, 11, 10, 0} for 32, as Qwen3.5 ships).
std::vector<int32_t> TinyRopeSections(int rope_dim);

// OK, or INVALID_ARGUMENT naming the first bad field, its command-line flag and its value, e.g.
// "tiny hybrid model: gdn_v_heads (--gdn-v-heads) = 3 must be a multiple of gdn_k_heads (2)".
// Also rejects options whose tensors would hold more than 2^32 values in all.
absl::Status ValidateTinyHybridOptions(const TinyHybridOptions& options);

// The GGUF image in memory, or the validation error.
absl::StatusOr<std::vector<uint8_t>> BuildTinyHybridGguf(const TinyHybridOptions& options);

// Builds the model and writes it to `path` (replacing any file there).
absl::Status WriteTinyHybridGguf(const TinyHybridOptions& options, const std::string& path);

}  // namespace tessera::convert
