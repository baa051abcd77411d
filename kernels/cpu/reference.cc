#include "kernels/cpu/reference.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/util/check.h"
#include "kernels/cpu/quant.h"

namespace tessera::kernels::cpu::reference {

void Matmul(std::span<const float> x, int64_t m, const WeightView& w, std::span<float> y) {
  const int64_t n = w.rows;
  const int64_t k = w.cols;
  TESSERA_CHECK(static_cast<int64_t>(x.size()) >= m * k && static_cast<int64_t>(y.size()) >= m * n,
                "reference::Matmul: bad sizes");
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t j = 0; j < n; ++j) {
    DequantizeRow(w.format, w.Row(j), row);
    for (int64_t i = 0; i < m; ++i) {
      double sum = 0.0;
      for (int64_t kk = 0; kk < k; ++kk) sum += double{x[i * k + kk]} * double{row[kk]};
      y[i * n + j] = static_cast<float>(sum);
    }
  }
}

std::vector<float> QuantizeActivationsToInt8Grid(std::span<const float> x) {
  TESSERA_CHECK(x.size() % kQuantBlockSize == 0, "QuantizeActivationsToInt8Grid: size % 32 != 0");
  std::vector<float> out(x.size());
  for (size_t b = 0; b < x.size(); b += kQuantBlockSize) {
    float amax = 0.0f;
    for (size_t j = b; j < b + kQuantBlockSize; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float scale = amax / 127.0f;
    const float inverse = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (size_t j = b; j < b + kQuantBlockSize; ++j) {
      out[j] = static_cast<float>(double{scale} * std::nearbyint(x[j] * inverse));
    }
  }
  return out;
}

void Int8Matmul(std::span<const float> x, int64_t m, const WeightView& w, std::span<float> y) {
  const std::vector<float> grid = QuantizeActivationsToInt8Grid(x.first(m * w.cols));
  Matmul(grid, m, w, y);
}

void RmsNorm(std::span<const float> x, std::span<const float> weight, float eps, int64_t m,
             std::span<float> y) {
  const int64_t d = static_cast<int64_t>(weight.size());
  for (int64_t i = 0; i < m; ++i) {
    double sum = 0.0;
    for (int64_t j = 0; j < d; ++j) sum += double{x[i * d + j]} * double{x[i * d + j]};
    const double scale = 1.0 / std::sqrt(sum / static_cast<double>(d) + double{eps});
    for (int64_t j = 0; j < d; ++j) {
      y[i * d + j] = static_cast<float>(double{x[i * d + j]} * scale * double{weight[j]});
    }
  }
}

void Rope(std::span<const int32_t> positions, int num_heads, int head_dim, int rope_dim,
          double theta_base, std::span<float> x) {
  for (size_t t = 0; t < positions.size(); ++t) {
    for (int h = 0; h < num_heads; ++h) {
      float* v = x.data() + (t * num_heads + h) * head_dim;
      for (int i = 0; i < rope_dim / 2; ++i) {
        const double angle =
            positions[t] * std::pow(theta_base, -2.0 * i / static_cast<double>(rope_dim));
        const double c = std::cos(angle);
        const double s = std::sin(angle);
        const double x0 = v[2 * i];
        const double x1 = v[2 * i + 1];
        v[2 * i] = static_cast<float>(x0 * c - x1 * s);
        v[2 * i + 1] = static_cast<float>(x0 * s + x1 * c);
      }
    }
  }
}

void SwiGlu(std::span<const float> gate, std::span<const float> up, std::span<float> out) {
  for (size_t i = 0; i < out.size(); ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * double{up[i]});
  }
}

namespace {

double LogSumExpF64(std::span<const float> x) {
  double max = -INFINITY;
  for (float v : x) max = std::max(max, double{v});
  double sum = 0.0;
  for (float v : x) sum += std::exp(double{v} - max);
  return max + std::log(sum);
}

}  // namespace

void Softmax(std::span<const float> x, std::span<float> out) {
  const double lse = LogSumExpF64(x);
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(std::exp(x[i] - lse));
}

void LogSoftmax(std::span<const float> x, std::span<float> out) {
  const double lse = LogSumExpF64(x);
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(x[i] - lse);
}

void Attention(std::span<const float> q, std::span<const float> k, std::span<const float> v,
               int num_tokens, int start_pos, int num_heads, int num_kv_heads, int head_dim,
               float scale, std::span<float> out) {
  const int group = num_heads / num_kv_heads;
  for (int t = 0; t < num_tokens; ++t) {
    const int ctx = start_pos + t + 1;
    for (int h = 0; h < num_heads; ++h) {
      const float* qr = q.data() + (t * num_heads + h) * head_dim;
      const int kvh = h / group;
      std::vector<double> scores(static_cast<size_t>(ctx));
      double max = -INFINITY;
      for (int j = 0; j < ctx; ++j) {
        const float* kr = k.data() + (j * num_kv_heads + kvh) * head_dim;
        double dot = 0.0;
        for (int d = 0; d < head_dim; ++d) dot += double{qr[d]} * double{kr[d]};
        scores[j] = dot * scale;
        max = std::max(max, scores[j]);
      }
      double sum = 0.0;
      for (double& s : scores) sum += (s = std::exp(s - max));
      float* o = out.data() + (t * num_heads + h) * head_dim;
      for (int d = 0; d < head_dim; ++d) {
        double acc = 0.0;
        for (int j = 0; j < ctx; ++j) {
          acc += scores[j] * double{v[(j * num_kv_heads + kvh) * head_dim + d]};
        }
        o[d] = static_cast<float>(acc / sum);
      }
    }
  }
}

}  // namespace tessera::kernels::cpu::reference
