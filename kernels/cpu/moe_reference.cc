#include "kernels/cpu/moe_reference.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "common/util/check.h"
#include "kernels/cpu/quant.h"

namespace tessera::kernels::cpu::reference {
namespace {

// A matrix [rows, cols] dequantized to f64, row-major.
struct DoubleMatrix {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<double> values;

  // Σ_c row(r)[c] * x[c].
  double Dot(int64_t r, std::span<const double> x) const {
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += values[r * cols + c] * x[c];
    return sum;
  }
  // y[r] = Σ_c row(first_row + r)[c] * x[c] for r < num_rows.
  std::vector<double> Times(std::span<const double> x, int64_t first_row, int64_t num_rows) const {
    std::vector<double> y(static_cast<size_t>(num_rows));
    for (int64_t r = 0; r < num_rows; ++r) y[r] = Dot(first_row + r, x);
    return y;
  }
};

DoubleMatrix Dequantize(const WeightView& w) {
  DoubleMatrix m{w.rows, w.cols, std::vector<double>(static_cast<size_t>(w.rows * w.cols))};
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    DequantizeRow(w.format, w.Row(r), row);
    std::copy(row.begin(), row.end(), m.values.begin() + r * w.cols);
  }
  return m;
}

// The expert stack as one matrix [num_experts * rows, cols]; expert e's rows start at e * rows.
DoubleMatrix Dequantize(const ExpertWeightsView& w) {
  return Dequantize(WeightView{w.format, w.data, w.num_experts * w.rows, w.cols});
}

double Silu(double v) { return v / (1.0 + std::exp(-v)); }

// down(silu(gate x) * up x) with the gate/up rows [first_row, first_row + ffn) and down rows
// [first_down_row, first_down_row + hidden).
std::vector<double> SwiGluFfn(const DoubleMatrix& gate, const DoubleMatrix& up,
                              const DoubleMatrix& down, int64_t first_row, int64_t ffn,
                              int64_t first_down_row, std::span<const double> x) {
  const std::vector<double> g = gate.Times(x, first_row, ffn);
  const std::vector<double> u = up.Times(x, first_row, ffn);
  std::vector<double> a(static_cast<size_t>(ffn));
  for (int64_t i = 0; i < ffn; ++i) a[i] = Silu(g[i]) * u[i];
  return down.Times(a, first_down_row, static_cast<int64_t>(x.size()));
}

// Indices of values sorted by value descending, ties by lower index (a stable sort).
template <typename T>
std::vector<int32_t> RankOrder(std::span<const T> values) {
  std::vector<int32_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return values[a] > values[b]; });
  return order;
}

}  // namespace

void MoeSelectTopK(std::span<const float> probs, int k, bool normalize_weights,
                   std::vector<int32_t>* ids, std::vector<float>* weights) {
  TESSERA_CHECK(k >= 1 && k <= static_cast<int64_t>(probs.size()), "MoeSelectTopK: bad k");
  const std::vector<int32_t> order = RankOrder(probs);
  ids->assign(order.begin(), order.begin() + k);
  double sum = 0.0;
  for (int32_t id : *ids) sum += probs[id];
  weights->resize(static_cast<size_t>(k));
  for (int r = 0; r < k; ++r) {
    const float p = probs[(*ids)[r]];
    (*weights)[r] = normalize_weights ? static_cast<float>(p / sum) : p;
  }
}

MoeTokenRoute MoeRoute(std::span<const double> logits, int k, bool normalize_weights) {
  TESSERA_CHECK(k >= 1 && k <= static_cast<int64_t>(logits.size()), "MoeRoute: bad k");
  const double max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> probs(logits.size());
  double total = 0.0;
  for (size_t e = 0; e < logits.size(); ++e) total += probs[e] = std::exp(logits[e] - max);
  for (double& p : probs) p /= total;
  const std::vector<int32_t> order = RankOrder(std::span<const double>(probs));
  MoeTokenRoute route;
  route.ids.assign(order.begin(), order.begin() + k);
  double sum = 0.0;
  for (int32_t id : route.ids) sum += probs[id];
  for (int32_t id : route.ids)
    route.weights.push_back(normalize_weights ? probs[id] / sum : probs[id]);
  return route;
}

void MoeFfn(const MoeFfnConfig& config, const MoeFfnWeights& weights, std::span<const float> x,
            int64_t num_tokens, std::span<float> out, std::vector<int32_t>* expert_ids) {
  CheckMoeFfnWeights(config, weights);
  const int64_t hidden = weights.router.cols;
  const int64_t ffn = weights.gate.rows;
  const int k = config.routing.num_experts_used;
  TESSERA_CHECK(static_cast<int64_t>(x.size()) >= num_tokens * hidden &&
                    static_cast<int64_t>(out.size()) >= num_tokens * hidden,
                "reference::MoeFfn: x or out smaller than [num_tokens, hidden]");
  const DoubleMatrix router = Dequantize(weights.router);
  const DoubleMatrix gate = Dequantize(weights.gate);
  const DoubleMatrix up = Dequantize(weights.up);
  const DoubleMatrix down = Dequantize(weights.down);
  const bool shared = weights.has_shared_expert();
  const bool gated = weights.has_shared_expert_gate();
  const DoubleMatrix shared_gate = shared ? Dequantize(weights.shared_gate) : DoubleMatrix{};
  const DoubleMatrix shared_up = shared ? Dequantize(weights.shared_up) : DoubleMatrix{};
  const DoubleMatrix shared_down = shared ? Dequantize(weights.shared_down) : DoubleMatrix{};
  const DoubleMatrix expert_gate = gated ? Dequantize(weights.shared_expert_gate) : DoubleMatrix{};
  if (expert_ids != nullptr) expert_ids->clear();
  for (int64_t t = 0; t < num_tokens; ++t) {
    const std::vector<double> xt(x.begin() + t * hidden, x.begin() + (t + 1) * hidden);
    const std::vector<double> logits = router.Times(xt, 0, router.rows);
    const MoeTokenRoute route = MoeRoute(logits, k, config.routing.normalize_weights);
    std::vector<double> sum(static_cast<size_t>(hidden), 0.0);
    for (int r = 0; r < k; ++r) {
      const int64_t e = route.ids[r];
      const std::vector<double> y = SwiGluFfn(gate, up, down, e * ffn, ffn, e * hidden, xt);
      for (int64_t i = 0; i < hidden; ++i) sum[i] += route.weights[r] * y[i];
    }
    if (shared) {
      const double g = gated ? 1.0 / (1.0 + std::exp(-expert_gate.Dot(0, xt))) : 1.0;
      const std::vector<double> y =
          SwiGluFfn(shared_gate, shared_up, shared_down, 0, shared_gate.rows, 0, xt);
      for (int64_t i = 0; i < hidden; ++i) sum[i] += g * y[i];
    }
    for (int64_t i = 0; i < hidden; ++i) out[t * hidden + i] = static_cast<float>(sum[i]);
    if (expert_ids != nullptr) {
      expert_ids->insert(expert_ids->end(), route.ids.begin(), route.ids.end());
    }
  }
}

}  // namespace tessera::kernels::cpu::reference
