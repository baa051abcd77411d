// The structured-output logits mask on the CPU: out[t] = logits[t] where bit t % 32 of
// allowed[t / 32] is set, else -inf (a select, no arithmetic). The cpu backend's sampler applies
// it (worker/sampler/slot_samplers.h); it is also the reference of the cuda kernel
// (kernels/cuda/token_mask.cuh), which must match it bit for bit.
#pragma once

#include <cstdint>
#include <span>

namespace tessera::kernels::cpu {

// Preconditions: allowed.size() * 32 >= logits.size(); out.size() >= logits.size() (out may be
// logits itself).
void MaskLogits(std::span<const float> logits, std::span<const uint32_t> allowed,
                std::span<float> out);

}  // namespace tessera::kernels::cpu
