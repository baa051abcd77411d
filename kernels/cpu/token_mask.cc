#include "kernels/cpu/token_mask.h"

#include <limits>

namespace tessera::kernels::cpu {

void MaskLogits(std::span<const float> logits, std::span<const uint32_t> allowed,
                std::span<float> out) {
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  for (size_t t = 0; t < logits.size(); ++t) {
    out[t] = ((allowed[t / 32] >> (t % 32)) & 1u) != 0u ? logits[t] : kMasked;
  }
}

}  // namespace tessera::kernels::cpu
