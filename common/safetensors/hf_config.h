// A Hugging Face config.json as the `{arch}.*` GGUF metadata llama.cpp's convert_hf_to_gguf.py
// writes for it (TextModel.set_gguf_parameters and the Llama/Qwen2/Qwen3 model classes), so that
// common/model reads a safetensors directory exactly as it reads the converted file.
//
//   architectures[0]        LlamaForCausalLM -> llama, Qwen2ForCausalLM -> qwen2,
//                           Qwen3ForCausalLM -> qwen3 (anything else: UNIMPLEMENTED naming it)
//   max_position_embeddings {arch}.context_length
//   hidden_size             {arch}.embedding_length
//   num_hidden_layers       {arch}.block_count
//   intermediate_size       {arch}.feed_forward_length
//   num_attention_heads     {arch}.attention.head_count
//   num_key_value_heads     {arch}.attention.head_count_kv (default: num_attention_heads)
//   head_dim                {arch}.attention.key_length and value_length (when given)
//   rms_norm_eps            {arch}.attention.layer_norm_rms_epsilon (default 1e-6, HF's)
//   rope_theta              {arch}.rope.freq_base (also read from rope_parameters; default 1e4)
//   vocab_size              {arch}.vocab_size
//   rope_scaling / rope_parameters (rope_type or type):
//     default / absent      nothing
//     linear                rope.scaling.type "linear", rope.scaling.factor
//     yarn                  rope.scaling.type "yarn", .factor, .original_context_length,
//                           .attn_factor (attention_factor / attn_factor), .yarn_beta_fast /
//                           .yarn_beta_slow (beta_fast / beta_slow)
//     llama3                no keys: rope_freqs (the per-pair divisors llama.cpp's converter
//                           computes into the rope_freqs.weight tensor)
//   A rope type or key ModelConfig cannot represent (dynamic, longrope, yarn's mscale, ...) is
//   UNIMPLEMENTED naming it; so are use_sliding_window true and a hidden_act other than silu.
// For llama, kRopeNeoxKey (common/model/model_config.h) is set true: the checkpoint's Q/K rows are
// as trained (rotate_half pairs), not permuted as the converter permutes them for GGUF.
// Missing or mistyped required keys are INVALID_ARGUMENT naming the key.
// Pure function; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/safetensors/metadata_list.h"
#include "nlohmann/json.hpp"

namespace tessera::safetensors {

struct HfModelConfig {
  std::string hf_architecture;  // architectures[0]
  std::string architecture;     // the GGUF name
  int vocab_size = 0;
  bool tie_word_embeddings = false;  // HF's default for these three classes
  std::vector<float> rope_freqs;     // llama3 scaling only: rope_freqs.weight, [head_dim / 2]
};

// Appends general.architecture and the `{arch}.*` keys above to `metadata`.
absl::StatusOr<HfModelConfig> ReadHfModelConfig(const nlohmann::json& config,
                                                MetadataList* metadata);

}  // namespace tessera::safetensors
