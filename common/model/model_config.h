// Transformer hyper-parameters read from GGUF metadata (`{arch}.*` keys, llama.cpp naming).
// Plain data; produced once at load, then shared read-only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"
#include "common/model/hybrid_layout.h"

namespace tessera::model {

// How positions are stretched to reach past the trained context (llama.cpp's
// llama_rope_scaling_type; "longrope" is not supported).
enum class RopeScalingType {
  kNone,    // plain RoPE
  kLinear,  // position interpolation: angles use pos / factor
  kYarn,    // YaRN: per-pair ramp between interpolated and original angles, plus a magnitude scale
};

std::string_view RopeScalingTypeName(RopeScalingType type);  // "none", "linear", "yarn"

// The `{arch}.rope.scaling.*` description, with llama.cpp's defaults for absent keys.
struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;  // rope.scaling.type
  // rope.scaling.factor, else the legacy rope.scale_linear; 1 when absent, and forced to 1 for
  // kNone (llama.cpp never scales when the type is "none"). Angles use freq_scale = 1 / factor.
  double factor = 1.0;
  // rope.scaling.original_context_length: the context the model was trained on before
  // extension; YaRN places its ramp with it. Defaults to context_length.
  int original_context_length = 0;
  double attn_factor = 1.0;     // rope.scaling.attn_factor: extra multiplier on cos/sin
  double yarn_beta_fast = 32.0;  // rope.scaling.yarn_beta_fast: pairs rotating more than this
                                 // many times over the original context are not interpolated
  double yarn_beta_slow = 1.0;   // rope.scaling.yarn_beta_slow: pairs rotating fewer times are
                                 // fully interpolated
};

// True when llama.cpp rotates this architecture's Q/K in NeoX mode (pairs (i, i + rope_dim / 2),
// HF's rotate_half) rather than normal mode (adjacent pairs): llama_model_rope_type in llama.cpp's
// src/llama-model.cpp lists qwen2, qwen2moe, qwen3, qwen3moe and qwen3next under
// LLAMA_ROPE_TYPE_NEOX and llama under LLAMA_ROPE_TYPE_NORM. The difference is in the weights:
// convert_hf_to_gguf permutes llama's Q/K rows to interleave each head's halves and stores the
// Qwen ones as trained. qwen35 and qwen35moe are LLAMA_ROPE_TYPE_IMROPE there, which pairs like
// NeoX and, for text (one position on every axis, sections checked by ReadHybridLayout), rotates
// exactly like it. Architectures outside those lists read as normal mode (the weights loader
// rejects the ones we do not run).
bool ArchitectureUsesNeoxRope(std::string_view architecture);

// A bool metadata key of ours (no llama.cpp file has it) that overrides the pairing the
// architecture implies. The safetensors view (common/safetensors/) sets it to true for a `llama`
// read from a Hugging Face directory: HF stores Q/K as trained, for rotate_half (NeoX pairs), and
// we do not permute them as llama.cpp's converter does, so the runner rotates them in NeoX mode.
inline constexpr std::string_view kRopeNeoxKey = "tessera.rope.neox";

struct ModelConfig {
  std::string architecture;       // general.architecture, e.g. "llama"
  std::string name;               // general.name ("" when absent)
  // {arch}.block_count; for the hybrids the trunk only: block_count - {arch}.nextn_predict_layers.
  int num_layers = 0;
  int hidden_size = 0;            // {arch}.embedding_length
  // {arch}.feed_forward_length; 0 when an MoE hybrid (qwen3next, qwen35moe) leaves it out.
  int ffn_size = 0;
  int num_heads = 0;              // {arch}.attention.head_count
  int num_kv_heads = 0;           // {arch}.attention.head_count_kv (defaults to num_heads)
  int head_dim = 0;               // {arch}.attention.key_length, else hidden_size / num_heads
  int rope_dim = 0;               // {arch}.rope.dimension_count (defaults to head_dim)
  int context_length = 0;         // {arch}.context_length
  int vocab_size = 0;             // {arch}.vocab_size, else the tokenizer's token count
  double rope_theta = 10000.0;    // {arch}.rope.freq_base
  RopeScaling rope_scaling;       // {arch}.rope.scaling.* (and rope.scale_linear)
  bool rope_neox = false;         // kRopeNeoxKey, else ArchitectureUsesNeoxRope
  double rms_norm_eps = 1e-5;     // {arch}.attention.layer_norm_rms_epsilon
  bool tied_embeddings = false;   // no separate output.weight tensor
  // The hybrid Gated-DeltaNet architectures (qwen3next, qwen35, qwen35moe; hybrid_config.h): the
  // layer kinds, GDN and MoE widths. The fields above then describe the gated attention layers
  // (num_heads query heads, each with a sigmoid gate of the same width in attn_q).
  std::optional<HybridLayout> hybrid;
};

// INVALID_ARGUMENT naming the key when a required key is missing or a value is out of range
// (non-positive sizes, heads not dividing hidden, kv heads not dividing heads, non-finite or
// non-positive floats, an unsupported rope.scaling.type), and for the hybrids every error of
// ReadHybridLayout. Only metadata is read: CheckHybridTensors (hybrid_tensors.h) checks a
// hybrid's tensor table against the result.
absl::StatusOr<ModelConfig> ReadModelConfig(const gguf::GgufFile& file);

}  // namespace tessera::model
