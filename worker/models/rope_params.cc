#include "worker/models/rope_params.h"

#include <cmath>

#include "common/util/check.h"

namespace tessera::worker {
namespace {

namespace cpu = kernels::cpu;

}  // namespace

cpu::RopeParams RopeParamsForModel(const model::ModelConfig& config,
                                   std::span<const float> freq_factors) {
  TESSERA_CHECK(freq_factors.empty() ||
                    static_cast<int>(freq_factors.size()) == config.rope_dim / 2,
                "RopeParamsForModel: freq_factors must hold rope_dim / 2 values");
  const model::RopeScaling& scaling = config.rope_scaling;
  cpu::RopeParams p{.rope_dim = config.rope_dim,
                    .mode = config.rope_neox ? cpu::RopeMode::kNeox : cpu::RopeMode::kNormal,
                    .theta_base = static_cast<float>(config.rope_theta),
                    .original_context_length = scaling.original_context_length,
                    .beta_fast = static_cast<float>(scaling.yarn_beta_fast),
                    .beta_slow = static_cast<float>(scaling.yarn_beta_slow),
                    .freq_factors = {freq_factors.begin(), freq_factors.end()}};
  // llama.cpp keeps the factor as f32 and inverts it in f32 (rope_freq_scale_train).
  if (scaling.type != model::RopeScalingType::kNone) {
    p.freq_scale = 1.0f / static_cast<float>(scaling.factor);
  }
  // llama_context: ext_factor defaults to 1 for YaRN, 0 otherwise. With YaRN it sets
  // attn_factor = get_mscale(factor) / (1 + 0.1 ln factor) — ~1, cancelling the mscale that
  // ggml's rope_yarn applies on top (llama.cpp PR 17945) — which we evaluate the same way in f32
  // so the product matches to the bit; then both multiply by rope.scaling.attn_factor.
  p.attn_factor = 1.0f;
  if (scaling.type == model::RopeScalingType::kYarn) {
    p.ext_factor = 1.0f;
    const float factor = 1.0f / p.freq_scale;
    p.attn_factor = factor <= 1.0f ? 1.0f : 0.1f * std::log(factor) + 1.0f;
    p.attn_factor *= 1.0f / (1.0f + 0.1f * std::log(factor));
  }
  p.attn_factor *= static_cast<float>(scaling.attn_factor);
  return p;
}

}  // namespace tessera::worker
