// The per-row logits adjustments a request asks for, on the CPU, in this order before sampling:
// AddLogitBias (OpenAI's logit_bias: one f32 add per listed token), then MaskLogits (the
// structured-output mask: out[t] = logits[t] where bit t % 32 of allowed[t / 32] is set, else
// -inf; a select). The cpu backend's sampler applies them (worker/sampler/slot_samplers.h); they
// are also the reference of the cuda kernel (kernels/cuda/logit_adjust.cuh), which must match
// them bit for bit.
#pragma once

#include <cstdint>
#include <span>

namespace tessera::kernels::cpu {

// logits[tokens[k]] += biases[k]. Preconditions: tokens.size() == biases.size(); each token in
// [0, logits.size()).
void AddLogitBias(std::span<float> logits, std::span<const int32_t> tokens,
                  std::span<const float> biases);

// Preconditions: allowed.size() * 32 >= logits.size(); out.size() >= logits.size() (out may be
// logits itself).
void MaskLogits(std::span<const float> logits, std::span<const uint32_t> allowed,
                std::span<float> out);

}  // namespace tessera::kernels::cpu
