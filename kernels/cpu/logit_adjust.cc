#include "kernels/cpu/logit_adjust.h"

#include <limits>

namespace tessera::kernels::cpu {

void AddLogitBias(std::span<float> logits, std::span<const int32_t> tokens,
                  std::span<const float> biases) {
  for (size_t k = 0; k < tokens.size(); ++k) logits[static_cast<size_t>(tokens[k])] += biases[k];
}

void MaskLogits(std::span<const float> logits, std::span<const uint32_t> allowed,
                std::span<float> out) {
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  for (size_t t = 0; t < logits.size(); ++t) {
    out[t] = ((allowed[t / 32] >> (t % 32)) & 1u) != 0u ? logits[t] : kMasked;
  }
}

}  // namespace tessera::kernels::cpu
