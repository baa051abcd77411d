// A model's RoPE parameters from its config, for the cos/sin table every backend builds
// (kernels::cpu::RopeTable: the cpu runner rotates with it, the cuda runner uploads it).
//
// Threading: a pure function.
#pragma once

#include <span>

#include "common/model/model_config.h"
#include "kernels/cpu/rope.h"

namespace tessera::worker {

// The RoPE parameters llama.cpp would pass to ggml_rope_ext for this model: the pairing mode of
// its architecture (config.rope_neox), the scaling read from metadata (freq_scale = 1 / factor;
// YaRN's ext_factor 1, its n_ctx_orig and betas), llama.cpp's llama_context adjustment of
// attn_factor, and the model's rope_freqs (may be empty).
// Precondition: freq_factors is empty or holds config.rope_dim / 2 values.
kernels::cpu::RopeParams RopeParamsForModel(const model::ModelConfig& config,
                                            std::span<const float> freq_factors);

}  // namespace tessera::worker
