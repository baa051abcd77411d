#include "kernels/cpu/rms_norm.h"

#include <cmath>

#include "common/util/check.h"

namespace tessera::kernels::cpu {

void RmsNorm(std::span<const float> x, std::span<const float> weight, float eps, int64_t m,
             std::span<float> y) {
  const int64_t d = static_cast<int64_t>(weight.size());
  TESSERA_CHECK(d > 0 && m >= 0, "RmsNorm: empty weight or negative m");
  TESSERA_CHECK(static_cast<int64_t>(x.size()) >= m * d, "RmsNorm: x is smaller than [m, d]");
  TESSERA_CHECK(static_cast<int64_t>(y.size()) >= m * d, "RmsNorm: y is smaller than [m, d]");
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x.data() + i * d;
    float* yi = y.data() + i * d;
    double sum = 0.0;
    for (int64_t j = 0; j < d; ++j) {
      const float square = xi[j] * xi[j];
      sum += static_cast<double>(square);
    }
    const float mean = static_cast<float>(sum / static_cast<double>(d));
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (int64_t j = 0; j < d; ++j) {
      const float normalized = xi[j] * scale;
      yi[j] = normalized * weight[j];
    }
  }
}

}  // namespace tessera::kernels::cpu
