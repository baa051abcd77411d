// Reads the hyper-parameters and layer layout of llama.cpp's hybrid Gated-DeltaNet architectures
// (`qwen3next`, `qwen35`, `qwen35moe`) from GGUF metadata and checks that they fit together. The
// keys and defaults are the ones llama.cpp's loaders read (src/models/qwen3next.cpp, qwen35.cpp,
// qwen35moe.cpp: load_arch_hparams; src/llama-model.cpp: the shared keys and expert checks).
// ReadModelConfig calls this for those architectures; the tensors are checked separately
// (hybrid_tensors.h). Stateless; any thread.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"
#include "common/model/hybrid_layout.h"
#include "common/model/model_config.h"

namespace tessera::model {

// "qwen3next", "qwen35", "qwen35moe" (matched exactly, as llama.cpp's llm_arch_from_string does).
bool IsHybridArchitecture(std::string_view architecture);

// True for the hybrids whose every FFN is routed experts plus a shared expert (qwen3next,
// qwen35moe); qwen35 has dense SwiGLU FFNs.
bool HybridArchitectureHasExperts(std::string_view architecture);

// Upper bound on the recurrent state of one sequence: far above every published model (Qwen3-Next
// needs 75 MiB), low enough that a corrupt file cannot make a worker size absurd state buffers.
inline constexpr int64_t kMaxRecurrentStateBytesPerSequence = int64_t{1} << 36;  // 64 GiB

// Precondition: IsHybridArchitecture(base.architecture) (checked). `base` holds what
// ReadModelConfig reads for every architecture: block_count in num_layers, the attention heads,
// head_dim, rope_dim and ffn_size (0 when an MoE hybrid has no feed_forward_length).
//
// INVALID_ARGUMENT, one line naming the key, when: a required key is missing (the ssm.* keys,
// attention.layer_norm_rms_epsilon, expert_count / expert_used_count for the MoE hybrids,
// rope.dimension_sections for qwen35*); ssm.conv_kernel or any other width is 0; the value heads
// (ssm.time_step_rank) are not a multiple of the key heads (ssm.group_count); ssm.inner_size is
// not state_size x time_step_rank; attention.value_length differs from the head dim;
// expert_used_count is 0 or exceeds expert_count; no expert FFN width can be found;
// nextn_predict_layers leaves no trunk; full_attention_interval is 0; attention.recurrent_layers
// does not have one entry per block; the rope sections put a rotated pair on the fourth M-RoPE
// axis (text never sets it); or the recurrent state per sequence exceeds
// kMaxRecurrentStateBytesPerSequence.
absl::StatusOr<HybridLayout> ReadHybridLayout(const gguf::GgufFile& file,
                                              const ModelConfig& base);

}  // namespace tessera::model
