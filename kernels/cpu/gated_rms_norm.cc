#include "kernels/cpu/gated_rms_norm.h"

#include "common/util/check.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/rms_norm.h"

namespace tessera::kernels::cpu {

void GatedRmsNorm(std::span<const float> x, std::span<const float> z, std::span<const float> weight,
                  float eps, int64_t rows, std::span<float> y, Isa isa) {
  const int64_t d = static_cast<int64_t>(weight.size());
  TESSERA_CHECK(d > 0 && rows >= 0, "GatedRmsNorm: empty weight or negative rows");
  const size_t n = static_cast<size_t>(rows * d);
  TESSERA_CHECK(x.size() >= n && z.size() >= n && y.size() >= n,
                "GatedRmsNorm: x, z or y smaller than [rows, d]");
  RmsNorm(x, weight, eps, rows, y);
  SwiGlu(z.first(n), y.first(n), y.first(n), isa);  // y <- silu(z) * y
}

}  // namespace tessera::kernels::cpu
