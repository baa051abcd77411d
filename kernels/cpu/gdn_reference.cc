#include "kernels/cpu/gdn_reference.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/util/check.h"

namespace tessera::kernels::cpu::reference {
namespace {

double Silu(double y) { return y / (1.0 + std::exp(-y)); }

// Input row j of [state; x] for one channel c (j < 0: state row K-1+j).
double ConvInput(std::span<const float> state, std::span<const float> x, int64_t channels,
                 int history, int64_t j, int64_t c) {
  return j < 0 ? state[(history + j) * channels + c] : x[j * channels + c];
}

// q̂ or k̂: x[offset, offset + d) / sqrt(Σ x² + eps) · scale (or · scale alone).
std::vector<double> Normalized(std::span<const float> x, int64_t offset, int d, bool normalize,
                               double eps, double scale) {
  std::vector<double> r(static_cast<size_t>(d));
  double sum = 0.0;
  for (int i = 0; i < d; ++i) sum += double{x[offset + i]} * double{x[offset + i]};
  const double factor = normalize ? scale / std::sqrt(sum + eps) : scale;
  for (int i = 0; i < d; ++i) r[i] = double{x[offset + i]} * factor;
  return r;
}

int KHeadOf(const GatedDeltaRuleParams& p, int h) {
  return p.head_mapping == GdnHeadMapping::kGrouped ? h / (p.num_v_heads / p.num_k_heads)
                                                    : h % p.num_k_heads;
}

void CheckGdn(const GatedDeltaRuleParams& p, const GdnSequenceData& d, std::span<float> state,
              std::span<float> out) {
  const int64_t t = d.num_tokens;
  const int64_t qk = t * p.num_k_heads * p.head_k_dim;
  const int64_t vv = t * p.num_v_heads * p.head_v_dim;
  TESSERA_CHECK(p.num_k_heads > 0 && p.num_v_heads % p.num_k_heads == 0,
                "reference::GatedDeltaRule: bad head counts");
  TESSERA_CHECK(static_cast<int64_t>(d.q.size()) >= qk && static_cast<int64_t>(d.k.size()) >= qk &&
                    static_cast<int64_t>(d.v.size()) >= vv &&
                    static_cast<int64_t>(d.g.size()) >= t * p.num_v_heads &&
                    static_cast<int64_t>(d.beta.size()) >= t * p.num_v_heads,
                "reference::GatedDeltaRule: inputs too small");
  TESSERA_CHECK(static_cast<int64_t>(state.size()) >= GdnStateElements(p) &&
                    static_cast<int64_t>(out.size()) >= vv,
                "reference::GatedDeltaRule: state or out too small");
}

// Token t's normalized q̂ (scaled) and k̂ for value head h; zeros past the end (HF's padding).
void TokenQk(const GatedDeltaRuleParams& p, const GdnSequenceData& d, int64_t t, int h,
             std::vector<double>* q, std::vector<double>* k) {
  if (t >= d.num_tokens) {
    q->assign(static_cast<size_t>(p.head_k_dim), 0.0);
    k->assign(static_cast<size_t>(p.head_k_dim), 0.0);
    return;
  }
  const int64_t offset = (t * p.num_k_heads + KHeadOf(p, h)) * p.head_k_dim;
  *q = Normalized(d.q, offset, p.head_k_dim, p.l2_normalize_qk, p.l2_eps, p.q_scale);
  *k = Normalized(d.k, offset, p.head_k_dim, p.l2_normalize_qk, p.l2_eps, 1.0);
}

// One chunk of one value head in f64, padded with zero tokens to the chunk size (HF's F.pad).
struct RefChunk {
  int size = 0;
  std::vector<double> q, k, v;  // [C, d_k], [C, d_k], [C, d_v]
  std::vector<double> gamma;    // cumulative log-decay inside the chunk [C]
  std::vector<double> beta;     // [C]
};

RefChunk LoadRefChunk(const GatedDeltaRuleParams& p, const GdnSequenceData& d, int h, int64_t c0,
                      int chunk_size) {
  const int dk = p.head_k_dim;
  const int dv = p.head_v_dim;
  RefChunk c;
  c.size = chunk_size;
  c.q.assign(static_cast<size_t>(chunk_size) * dk, 0.0);
  c.k.assign(static_cast<size_t>(chunk_size) * dk, 0.0);
  c.v.assign(static_cast<size_t>(chunk_size) * dv, 0.0);
  c.gamma.assign(static_cast<size_t>(chunk_size), 0.0);
  c.beta.assign(static_cast<size_t>(chunk_size), 0.0);
  std::vector<double> q, k;
  double cumulative = 0.0;
  for (int t = 0; t < chunk_size; ++t) {
    const int64_t tt = c0 + t;
    TokenQk(p, d, tt, h, &q, &k);
    std::copy(q.begin(), q.end(), c.q.begin() + t * dk);
    std::copy(k.begin(), k.end(), c.k.begin() + t * dk);
    if (tt < d.num_tokens) {
      for (int j = 0; j < dv; ++j) c.v[t * dv + j] = d.v[(tt * p.num_v_heads + h) * dv + j];
      cumulative += d.g[tt * p.num_v_heads + h];
      c.beta[t] = d.beta[tt * p.num_v_heads + h];
    }
    c.gamma[t] = cumulative;
  }
  return c;
}

double Dot(const std::vector<double>& a, int64_t ao, const std::vector<double>& b, int64_t bo,
           int n) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += a[ao + i] * b[bo + i];
  return sum;
}

// HF's `attn` after its row loop plus the identity: (I + A)⁻¹ with
// A[t][s] = β_t (k_t·k_s) e^{γ_t−γ_s}, s < t.
std::vector<double> RefChunkInverse(const RefChunk& c, int dk) {
  const int n = c.size;
  std::vector<double> attn(static_cast<size_t>(n) * n, 0.0);
  for (int t = 0; t < n; ++t) {
    for (int s = 0; s < t; ++s) {
      attn[t * n + s] =
          -c.beta[t] * Dot(c.k, t * dk, c.k, s * dk, dk) * std::exp(c.gamma[t] - c.gamma[s]);
    }
  }
  std::vector<double> row(static_cast<size_t>(n));
  for (int i = 1; i < n; ++i) {
    for (int j = 0; j < i; ++j) row[j] = attn[i * n + j];
    for (int j = 0; j < i; ++j) {
      double sum = 0.0;
      for (int m = 0; m < i; ++m) sum += row[m] * attn[m * n + j];
      attn[i * n + j] = row[j] + sum;
    }
  }
  for (int t = 0; t < n; ++t) attn[t * n + t] += 1.0;
  return attn;
}
}  // namespace

void CausalConv1d(const CausalConvParams& params, std::span<const float> weight,
                  std::span<const float> x, int64_t num_tokens, std::span<float> state,
                  std::span<float> out) {
  const int64_t c_count = params.channels;
  const int k_size = params.kernel_size;
  const int history = k_size - 1;
  TESSERA_CHECK(c_count > 0 && k_size >= 1, "reference::CausalConv1d: bad params");
  TESSERA_CHECK(static_cast<int64_t>(x.size()) >= num_tokens * c_count &&
                    static_cast<int64_t>(out.size()) >= num_tokens * c_count &&
                    static_cast<int64_t>(state.size()) >= history * c_count,
                "reference::CausalConv1d: buffers too small");
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t c = 0; c < c_count; ++c) {
      double y = 0.0;
      for (int k = 0; k < k_size; ++k) {
        y += double{weight[c * k_size + k]} *
             ConvInput(state, x, c_count, history, t - history + k, c);
      }
      out[t * c_count + c] = static_cast<float>(params.apply_silu ? Silu(y) : y);
    }
  }
  std::vector<float> next(static_cast<size_t>(history * c_count));
  for (int r = 0; r < history; ++r) {
    for (int64_t c = 0; c < c_count; ++c) {
      next[r * c_count + c] =
          static_cast<float>(ConvInput(state, x, c_count, history, num_tokens + r - history, c));
    }
  }
  std::copy(next.begin(), next.end(), state.begin());
}

void GatedDeltaRuleRecurrent(const GatedDeltaRuleParams& p, const GdnSequenceData& d,
                             std::span<float> state, std::span<float> out) {
  CheckGdn(p, d, state, out);
  const int dk = p.head_k_dim;
  const int dv = p.head_v_dim;
  std::vector<double> s(state.begin(), state.begin() + GdnStateElements(p));
  std::vector<double> q, k, u(static_cast<size_t>(dv));
  for (int64_t t = 0; t < d.num_tokens; ++t) {
    for (int h = 0; h < p.num_v_heads; ++h) {
      TokenQk(p, d, t, h, &q, &k);
      double* sh = s.data() + static_cast<int64_t>(h) * dk * dv;
      const double decay = std::exp(double{d.g[t * p.num_v_heads + h]});
      const double beta = d.beta[t * p.num_v_heads + h];
      const float* v = d.v.data() + (t * p.num_v_heads + h) * dv;
      for (int64_t e = 0; e < static_cast<int64_t>(dk) * dv; ++e) sh[e] *= decay;
      for (int j = 0; j < dv; ++j) {
        double kv = 0.0;
        for (int i = 0; i < dk; ++i) kv += sh[i * dv + j] * k[i];
        u[j] = beta * (double{v[j]} - kv);
      }
      for (int i = 0; i < dk; ++i) {
        for (int j = 0; j < dv; ++j) sh[i * dv + j] += k[i] * u[j];
      }
      for (int j = 0; j < dv; ++j) {
        double o = 0.0;
        for (int i = 0; i < dk; ++i) o += sh[i * dv + j] * q[i];
        out[(t * p.num_v_heads + h) * dv + j] = static_cast<float>(o);
      }
    }
  }
  for (size_t e = 0; e < s.size(); ++e) state[e] = static_cast<float>(s[e]);
}

namespace {

// One chunk against state s [d_k, d_v] (f64): writes the outputs of the chunk's real tokens
// (out rows from c0) and advances s.
void RefChunkStep(const GatedDeltaRuleParams& p, const RefChunk& c, int h, int64_t c0,
                  int64_t num_tokens, double* s, std::span<float> out) {
  const int n = c.size;
  const int dk = p.head_k_dim;
  const int dv = p.head_v_dim;
  const std::vector<double> tm = RefChunkInverse(c, dk);
  std::vector<double> vnew(static_cast<size_t>(n) * dv, 0.0);
  for (int t = 0; t < n; ++t) {
    std::vector<double> cumdecay(static_cast<size_t>(dk), 0.0);  // row t of T (β e^γ K)
    for (int r = 0; r <= t; ++r) {
      const double f = tm[t * n + r] * c.beta[r];
      for (int j = 0; j < dv; ++j) vnew[t * dv + j] += f * c.v[r * dv + j];
      for (int i = 0; i < dk; ++i) cumdecay[i] += f * std::exp(c.gamma[r]) * c.k[r * dk + i];
    }
    for (int i = 0; i < dk; ++i) {
      for (int j = 0; j < dv; ++j) vnew[t * dv + j] -= cumdecay[i] * s[i * dv + j];
    }
  }
  for (int t = 0; t < n && c0 + t < num_tokens; ++t) {
    for (int j = 0; j < dv; ++j) {
      double o = 0.0;
      for (int i = 0; i < dk; ++i) o += c.q[t * dk + i] * std::exp(c.gamma[t]) * s[i * dv + j];
      for (int r = 0; r <= t; ++r) {
        o += Dot(c.q, t * dk, c.k, r * dk, dk) * std::exp(c.gamma[t] - c.gamma[r]) *
             vnew[r * dv + j];
      }
      out[((c0 + t) * p.num_v_heads + h) * dv + j] = static_cast<float>(o);
    }
  }
  const double last = c.gamma[n - 1];
  for (int i = 0; i < dk; ++i) {
    for (int j = 0; j < dv; ++j) {
      double sum = s[i * dv + j] * std::exp(last);
      for (int t = 0; t < n; ++t) {
        sum += c.k[t * dk + i] * std::exp(last - c.gamma[t]) * vnew[t * dv + j];
      }
      s[i * dv + j] = sum;
    }
  }
}

}  // namespace

void GatedDeltaRuleChunked(const GatedDeltaRuleParams& p, const GdnSequenceData& d, int chunk_size,
                           std::span<float> state, std::span<float> out) {
  CheckGdn(p, d, state, out);
  TESSERA_CHECK(chunk_size > 0, "reference::GatedDeltaRuleChunked: chunk_size must be positive");
  const int64_t head_elements = static_cast<int64_t>(p.head_k_dim) * p.head_v_dim;
  std::vector<double> s(state.begin(), state.begin() + GdnStateElements(p));
  for (int h = 0; h < p.num_v_heads; ++h) {
    for (int64_t c0 = 0; c0 < d.num_tokens; c0 += chunk_size) {
      const RefChunk chunk = LoadRefChunk(p, d, h, c0, chunk_size);
      RefChunkStep(p, chunk, h, c0, d.num_tokens, s.data() + h * head_elements, out);
    }
  }
  for (size_t e = 0; e < s.size(); ++e) state[e] = static_cast<float>(s[e]);
}

void GdnGates(std::span<const float> b, std::span<const float> alpha, std::span<const float> a_coef,
              std::span<const float> dt_bias, int64_t rows, std::span<float> g,
              std::span<float> beta) {
  const int64_t heads = static_cast<int64_t>(a_coef.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      const double x = double{alpha[r * heads + h]} + double{dt_bias[h]};
      const double softplus = x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
      g[r * heads + h] = static_cast<float>(double{a_coef[h]} * softplus);
      beta[r * heads + h] = static_cast<float>(1.0 / (1.0 + std::exp(-double{b[r * heads + h]})));
    }
  }
}

void GatedRmsNorm(std::span<const float> x, std::span<const float> z, std::span<const float> weight,
                  float eps, int64_t rows, std::span<float> y) {
  const int64_t d = static_cast<int64_t>(weight.size());
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int64_t j = 0; j < d; ++j) sum += double{x[r * d + j]} * double{x[r * d + j]};
    const double scale = 1.0 / std::sqrt(sum / static_cast<double>(d) + double{eps});
    for (int64_t j = 0; j < d; ++j) {
      const double normalized = double{x[r * d + j]} * scale * double{weight[j]};
      y[r * d + j] = static_cast<float>(normalized * Silu(double{z[r * d + j]}));
    }
  }
}

}  // namespace tessera::kernels::cpu::reference
