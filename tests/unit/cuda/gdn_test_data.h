// Host-side data of the gated delta rule kernel tests (gated_delta_rule_kernel_test.cc): one
// step's inputs for several sequences, laid out as the layer lays them out (q | k | v views into
// one wider conv-output row), a state pool, and runs of the CUDA kernel (emulated or on a GPU),
// the CPU kernel and the f64 reference on the same values.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "kernels/cpu/gated_delta_rule.h"
#include "kernels/cpu/gdn_reference.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cuda/gated_delta_rule.cuh"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda::gdn_test {

using kernels::cpu::RecurrentSequence;

struct Heads {
  int hk, hv, dk, dv;
  GdnHeadMapping mapping = GdnHeadMapping::kGrouped;
};

inline GdnDeviceParams DeviceParams(const Heads& h) {
  GdnDeviceParams p;
  p.num_k_heads = h.hk;
  p.num_v_heads = h.hv;
  p.head_k_dim = h.dk;
  p.head_v_dim = h.dv;
  p.head_mapping = h.mapping;
  p.q_scale = 1.0f / std::sqrt(static_cast<float>(h.dk));
  return p;
}

inline kernels::cpu::GatedDeltaRuleParams CpuParams(const GdnDeviceParams& p) {
  kernels::cpu::GatedDeltaRuleParams c;
  c.num_k_heads = p.num_k_heads;
  c.num_v_heads = p.num_v_heads;
  c.head_k_dim = p.head_k_dim;
  c.head_v_dim = p.head_v_dim;
  c.head_mapping = p.head_mapping == GdnHeadMapping::kGrouped
                       ? kernels::cpu::GdnHeadMapping::kGrouped
                       : kernels::cpu::GdnHeadMapping::kTiled;
  c.l2_normalize_qk = p.l2_normalize_qk;
  c.l2_eps = p.l2_eps;
  c.q_scale = p.q_scale;
  return c;
}

inline kernels::cpu::GdnForm CpuForm(GdnForm form) {
  if (form == GdnForm::kRecurrent) return kernels::cpu::GdnForm::kRecurrent;
  return form == GdnForm::kChunked ? kernels::cpu::GdnForm::kChunked : kernels::cpu::GdnForm::kAuto;
}

// One step: sequences of tokens[i] rows in slot slots[i] of a pool of num_slots.
struct Step {
  std::vector<int> tokens;
  std::vector<int> slots;
  int num_slots = 0;
};

// The step's inputs: rows of [q (h_k·d_k) | k (h_k·d_k) | v (h_v·d_v) | 3 unused], as T and as
// the floats the kernels read; g in [g_lo, 0] and beta in [0, 1] (f32); random states.
template <typename T>
struct StepData {
  GdnDeviceParams p;
  int rows = 0;
  int64_t stride = 0;
  std::vector<T> qkv;
  std::vector<float> qkv_read;
  std::vector<float> g, beta, states;
  std::vector<DeviceRecurrentSequence> device_seqs;  // + one padding entry (slot -1)
  std::vector<RecurrentSequence> cpu_seqs;

  int64_t k_offset() const { return int64_t{p.num_k_heads} * p.head_k_dim; }
  int64_t v_offset() const { return 2 * k_offset(); }
  int64_t state_size() const { return int64_t{p.num_v_heads} * p.head_k_dim * p.head_v_dim; }
  int64_t out_width() const { return int64_t{p.num_v_heads} * p.head_v_dim; }
};

template <typename T>
StepData<T> MakeStepData(const GdnDeviceParams& p, const Step& step, std::mt19937& rng,
                         float g_lo = -1.0f) {
  StepData<T> d;
  d.p = p;
  for (size_t i = 0; i < step.tokens.size(); ++i) {
    d.device_seqs.push_back({d.rows, step.tokens[i], step.slots[i]});
    d.cpu_seqs.push_back({d.rows, step.tokens[i], step.slots[i]});
    d.rows += step.tokens[i];
  }
  d.device_seqs.push_back({d.rows, 0, -1});
  d.stride = 2 * d.k_offset() + d.out_width() + 3;
  d.qkv = simt::Convert<T>(simt::RandomFloats(d.rows * d.stride, rng, -1, 1));
  d.qkv_read = simt::ToFloats<T>(d.qkv);
  d.g = simt::RandomFloats(int64_t{d.rows} * p.num_v_heads, rng, g_lo, 0);
  d.beta = simt::RandomFloats(int64_t{d.rows} * p.num_v_heads, rng, 0, 1);
  d.states = simt::RandomFloats(step.num_slots * d.state_size(), rng, -0.5f, 0.5f);
  return d;
}

struct Result {
  std::vector<float> out;     // [rows, h_v, d_v]
  std::vector<float> states;  // the whole pool
};

// Device copies of a step's inputs and state pool.
template <typename T>
struct DeviceStep {
  explicit DeviceStep(const StepData<T>& d)
      : qkv(std::span<const T>(d.qkv)),
        g(std::span<const float>(d.g)),
        beta(std::span<const float>(d.beta)),
        states(std::span<const float>(d.states)),
        out(std::max<int64_t>(1, d.rows * d.out_width())) {}

  // Launches the rule on `seqs`, whose row 0 is row `first_row` of the step.
  void Launch(simt::TestLauncher& launcher, const StepData<T>& d, int64_t first_row,
              std::span<const DeviceRecurrentSequence> seqs, GdnForm form) {
    simt::DeviceBuffer<DeviceRecurrentSequence> d_seqs{seqs};
    const T* base = qkv.get() + first_row * d.stride;
    const int64_t gates = first_row * d.p.num_v_heads;
    const GdnDeviceInputs<T> in{
        base,     d.stride,        base + d.k_offset(), d.stride, base + d.v_offset(),
        d.stride, g.get() + gates, beta.get() + gates};
    const auto status =
        LaunchGatedDeltaRule(launcher, d.p, in, d_seqs.get(), static_cast<int>(seqs.size()),
                             states.get(), out.get() + first_row * d.out_width(), form);
    EXPECT_TRUE(status.ok()) << status;
  }

  Result Read(const StepData<T>& d) {
    Result r{std::vector<float>(d.rows * d.out_width()), states.ToHost()};
    for (size_t i = 0; i < r.out.size(); ++i) r.out[i] = simt::AsFloat(out[i]);
    return r;
  }

  simt::DeviceBuffer<T> qkv;
  simt::DeviceBuffer<float> g, beta, states;
  simt::DeviceBuffer<T> out;
};

// The CUDA kernel on the step (emulated under `schedule`, or on the GPU), one launch.
template <typename T>
Result RunDevice(const simt::Schedule& schedule, const StepData<T>& d, GdnForm form) {
  DeviceStep<T> device(d);
  simt::TestLauncher launcher(schedule);
  EXPECT_TRUE(AllowGatedDeltaRuleSharedMemory<T>(launcher).ok());
  device.Launch(launcher, d, 0, d.device_seqs, form);
  return device.Read(d);
}

// A one-sequence step run as consecutive launches over the token ranges [ends[i-1], ends[i])
// (ends[-1] = 0), the state carried in the slot: a prefill then decode steps.
template <typename T>
Result RunDeviceInParts(const simt::Schedule& schedule, const StepData<T>& d,
                        const std::vector<int>& ends, GdnForm form) {
  DeviceStep<T> device(d);
  simt::TestLauncher launcher(schedule);
  EXPECT_TRUE(AllowGatedDeltaRuleSharedMemory<T>(launcher).ok());
  int begin = 0;
  for (int end : ends) {
    const DeviceRecurrentSequence seq{0, end - begin, d.device_seqs[0].state_slot};
    device.Launch(launcher, d, begin, {&seq, 1}, form);
    begin = end;
  }
  return device.Read(d);
}

// The CPU kernel on the same values (f32, the AVX path the machine has).
template <typename T>
Result RunCpu(const StepData<T>& d, GdnForm form) {
  kernels::cpu::ThreadPool pool(1);
  const std::span<const float> qkv(d.qkv_read);
  const kernels::cpu::GdnInputs in{
      qkv, d.stride, qkv.subspan(d.k_offset()), d.stride, qkv.subspan(d.v_offset()), d.stride,
      d.g, d.beta};
  Result r{std::vector<float>(d.rows * d.out_width()), d.states};
  if (d.rows == 0) return r;
  kernels::cpu::GatedDeltaRule(pool, CpuParams(d.p), in, d.cpu_seqs, r.states, r.out,
                               CpuForm(form));
  return r;
}

// The f64 token-by-token reference, sequence by sequence.
template <typename T>
Result RunReference(const StepData<T>& d) {
  Result r{std::vector<float>(d.rows * d.out_width()), d.states};
  const int hv = d.p.num_v_heads;
  for (const RecurrentSequence& s : d.cpu_seqs) {
    if (s.num_tokens == 0) continue;
    std::vector<float> q, k, v, g, beta;
    for (int64_t t = s.token_begin; t < s.token_begin + s.num_tokens; ++t) {
      const float* row = d.qkv_read.data() + t * d.stride;
      q.insert(q.end(), row, row + d.k_offset());
      k.insert(k.end(), row + d.k_offset(), row + d.v_offset());
      v.insert(v.end(), row + d.v_offset(), row + d.v_offset() + d.out_width());
      g.insert(g.end(), d.g.begin() + t * hv, d.g.begin() + (t + 1) * hv);
      beta.insert(beta.end(), d.beta.begin() + t * hv, d.beta.begin() + (t + 1) * hv);
    }
    const std::span<float> state(r.states.data() + s.state_slot * d.state_size(), d.state_size());
    const std::span<float> out(r.out.data() + s.token_begin * d.out_width(),
                               s.num_tokens * d.out_width());
    kernels::cpu::reference::GatedDeltaRuleRecurrent(CpuParams(d.p),
                                                     {q, k, v, g, beta, s.num_tokens}, state, out);
  }
  return r;
}

}  // namespace tessera::cuda::gdn_test
