// Google Benchmark for the CPU kernels at SmolLM2-135M shapes (hidden 576, ffn 1536, vocab
// 49152, 9 heads / 3 KV heads of 64): matmul with f32 / Q8_0 / Q4_1 weights for m = 1 (decode)
// and m = 8, 512 (prefill), paged-attention decode, and the sampler at vocab 49152. Also the 4-bit
// float formats (NVFP4, MXFP4) against Q4_1 on a 2048 x 2048 weight at m = 1 and 16.
// Build Release (build-kern-rel) for numbers; see docs/perf/cpu-kernels.md.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/gguf/dequantize.h"
#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/int8_matmul.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/thread_pool.h"
#include "tools/bench/bench_util.h"
#include "worker/sampler/sampler.h"

namespace tessera::kernels::cpu {
namespace {

using bench::Pool;
using bench::RandomFloats;

struct BenchWeights {
  AlignedVector<uint8_t> bytes;
  WeightView view;
};

BenchWeights MakeBenchWeights(WeightFormat format, int64_t n, int64_t k) {
  const auto f = RandomFloats(static_cast<size_t>(n * k), 1);
  BenchWeights w;
  const std::vector<uint8_t> encoded = *gguf::QuantizeFromF32(ToGgmlType(format), f);
  w.bytes.assign(encoded.begin(), encoded.end());  // 64-byte aligned copy
  w.view = WeightView{format, w.bytes.data(), n, k};
  return w;
}

// The arguments of BM_Matmul and BM_Int8Matmul: format, n, k, m, threads, isa.
struct MatmulCase {
  WeightFormat format;
  int64_t n, k, m;
  ThreadPool* pool;
  Isa isa;
};

// The case of `state`, or nothing (the run marked skipped) when this CPU lacks its ISA.
std::optional<MatmulCase> ParseMatmulCase(benchmark::State& state) {
  const MatmulCase c{static_cast<WeightFormat>(state.range(0)), state.range(1), state.range(2),
                     state.range(3), &Pool(static_cast<int>(state.range(4))),
                     static_cast<Isa>(state.range(5))};
  if (IsaSupported(c.isa)) return c;
  state.SkipWithError("ISA not supported");
  return std::nullopt;
}

// Args: format, n, k, m, threads, isa.
void BM_Matmul(benchmark::State& state) {
  const std::optional<MatmulCase> c = ParseMatmulCase(state);
  if (!c) return;
  const auto [format, n, k, m, pool_ptr, isa] = *c;
  ThreadPool& pool = *pool_ptr;
  const BenchWeights w = MakeBenchWeights(format, n, k);
  const auto x = RandomFloats(static_cast<size_t>(m * k), 2);
  AlignedVector<float> y(static_cast<size_t>(m * n));
  for (auto _ : state) {
    Matmul(pool, x, m, w.view, y, isa);
    benchmark::DoNotOptimize(y.data());
  }
  const double flops = 2.0 * static_cast<double>(m * n * k);
  state.counters["GFLOPS"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weightGB/s"] = benchmark::Counter(
      static_cast<double>(w.bytes.size()) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(WeightFormatName(format)) + " " + std::string(IsaName(isa)));
}

void MatmulArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"fmt", "n", "k", "m", "thr", "isa"});
  const int64_t isa = static_cast<int64_t>(BestIsa());
  const int64_t shapes[][2] = {{576, 576}, {1536, 576}, {576, 1536}, {49152, 576}};
  for (int64_t m : {1, 8, 512}) {
    for (const auto& s : shapes) {
      if (m == 512 && s[0] == 49152) continue;  // logits are computed for sampled rows only
      for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kQ8_0, WeightFormat::kQ4_1}) {
        for (int64_t threads : {1, 2}) {
          b->Args({static_cast<int64_t>(f), s[0], s[1], m, threads, isa});
        }
      }
    }
  }
  // 4-bit floats against Q4_1 (4.5 and 4.25 bits per weight against 5), 2048 x 2048, on the best
  // ISA and on AVX2.
  for (WeightFormat f : {WeightFormat::kQ4_1, WeightFormat::kNvfp4, WeightFormat::kMxfp4}) {
    for (int64_t m : {1, 16}) {
      for (int64_t threads : {1, 2}) {
        b->Args({static_cast<int64_t>(f), 2048, 2048, m, threads, isa});
      }
      b->Args({static_cast<int64_t>(f), 2048, 2048, m, 1, static_cast<int64_t>(Isa::kAvx2)});
    }
  }
  // ISA comparison on one decode and one prefill shape, one thread.
  for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kQ4_1}) {
    for (int64_t m : {1, 512}) {
      for (Isa i : {Isa::kScalar, Isa::kAvx2}) {
        b->Args({static_cast<int64_t>(f), 1536, 576, m, 1, static_cast<int64_t>(i)});
      }
    }
  }
}
BENCHMARK(BM_Matmul)->Apply(MatmulArgs)->Unit(benchmark::kMicrosecond)->UseRealTime();

// All matmuls of one SmolLM2-135M forward step for m rows (30 layers x q, k, v, o, gate, up,
// down, plus the tied logits), each layer with its own weights: the working set (f32 538 MB;
// Q8_0 143 MB, Q4_1 97 MB with the Q8_0 logits) does not stay in cache between calls, unlike the
// single-matrix runs.
// SmolLM2-135M's matmul weights (30 layers of q, k, v, o, gate, up, down, then the logits).
std::vector<BenchWeights> ModelWeights(WeightFormat format, double* params) {
  constexpr int kLayers = 30;
  const int64_t shapes[][2] = {{576, 576}, {192, 576}, {192, 576}, {576, 576},
                               {1536, 576}, {1536, 576}, {576, 1536}};
  std::vector<BenchWeights> weights;
  for (int layer = 0; layer < kLayers; ++layer) {
    for (const auto& s : shapes) {
      weights.push_back(MakeBenchWeights(format, s[0], s[1]));
      *params += static_cast<double>(s[0] * s[1]);
    }
  }
  // Logits: the tied embedding is Q8_0 in SmolLM2's GGUF; f32 when everything is dequantized.
  weights.push_back(MakeBenchWeights(format == WeightFormat::kF32 ? format : WeightFormat::kQ8_0,
                                     49152, 576));
  *params += 49152.0 * 576;
  return weights;
}

// Args: format, m, threads.
void BM_ModelMatmuls(benchmark::State& state) {
  const auto format = static_cast<WeightFormat>(state.range(0));
  const int64_t m = state.range(1);
  ThreadPool& pool = Pool(static_cast<int>(state.range(2)));
  double params = 0;
  const std::vector<BenchWeights> weights = ModelWeights(format, &params);
  const auto x = RandomFloats(static_cast<size_t>(m * 1536), 2);
  AlignedVector<float> y(static_cast<size_t>(m * 49152));
  for (auto _ : state) {
    for (const BenchWeights& w : weights) {
      Matmul(pool, {x.data(), static_cast<size_t>(m * w.view.cols)}, m, w.view, y);
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(m), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * params * m * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(WeightFormatName(format)) + " weights");
}
BENCHMARK(BM_ModelMatmuls)
    ->ArgNames({"fmt", "m", "thr"})
    ->ArgsProduct({{static_cast<int64_t>(WeightFormat::kF32),
                    static_cast<int64_t>(WeightFormat::kQ8_0),
                    static_cast<int64_t>(WeightFormat::kQ4_1)},
                   {1, 8},
                   {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// One int8-activation matmul (int8_matmul.h) on a single matrix that stays in cache between
// iterations: the kernel's compute rate, apart from memory. Args as BM_Matmul.
void BM_Int8Matmul(benchmark::State& state) {
  const std::optional<MatmulCase> c = ParseMatmulCase(state);
  if (!c) return;
  const auto [format, n, k, m, pool_ptr, isa] = *c;
  ThreadPool& pool = *pool_ptr;
  const BenchWeights w = MakeBenchWeights(format, n, k);
  AlignedVector<uint8_t> packed(PackedInt8Bytes(format, n, k));
  const Int8MatmulOutput out{PackInt8Weights(w.view, packed), {}};
  const auto x = RandomFloats(static_cast<size_t>(m * k), 2);
  AlignedVector<float> y(static_cast<size_t>(m * n));
  const Int8MatmulOutput output{out.w, y};
  for (auto _ : state) {
    Int8MatmulSameInput(pool, x, m, {&output, 1}, isa);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * static_cast<double>(m * n * k) * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(WeightFormatName(format)) + " " + std::string(IsaName(isa)) +
                 ", int8 activations");
}
BENCHMARK(BM_Int8Matmul)
    ->ArgNames({"fmt", "n", "k", "m", "thr", "isa"})
    ->ArgsProduct({{static_cast<int64_t>(WeightFormat::kQ8_0),
                    static_cast<int64_t>(WeightFormat::kQ4_1)},
                   {1536},
                   {576},
                   {1, 8},
                   {1, 2},
                   {static_cast<int64_t>(BestIsa())}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// BM_ModelMatmuls with int8 activations (int8_matmul.h; lossy): weights packed once.
// Args: format (Q4_1 or Q8_0, the logits Q8_0 either way), m, threads.
void BM_Int8ModelMatmuls(benchmark::State& state) {
  const auto format = static_cast<WeightFormat>(state.range(0));
  const int64_t m = state.range(1);
  ThreadPool& pool = Pool(static_cast<int>(state.range(2)));
  double params = 0;
  const std::vector<BenchWeights> weights = ModelWeights(format, &params);
  std::vector<AlignedVector<uint8_t>> packed(weights.size());
  std::vector<Int8WeightView> views;
  for (size_t i = 0; i < weights.size(); ++i) {
    const WeightView& w = weights[i].view;
    packed[i].resize(PackedInt8Bytes(w.format, w.rows, w.cols));
    views.push_back(PackInt8Weights(w, packed[i]));
  }
  const auto x = RandomFloats(static_cast<size_t>(m * 1536), 2);
  AlignedVector<float> y(static_cast<size_t>(m * 49152));
  for (auto _ : state) {
    for (const Int8WeightView& w : views) {
      const Int8MatmulOutput out{w, y};
      Int8MatmulSameInput(pool, {x.data(), static_cast<size_t>(m * w.cols)}, m, {&out, 1});
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(m), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * params * m * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(WeightFormatName(format)) + " weights, int8 activations");
}
BENCHMARK(BM_Int8ModelMatmuls)
    ->ArgNames({"fmt", "m", "thr"})
    ->ArgsProduct({{static_cast<int64_t>(WeightFormat::kQ8_0),
                    static_cast<int64_t>(WeightFormat::kQ4_1)},
                   {1, 8},
                   {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Cost of one ParallelFor with no work (dispatch + join), per thread count.
void BM_ParallelForOverhead(benchmark::State& state) {
  ThreadPool& pool = Pool(static_cast<int>(state.range(0)));
  std::vector<int64_t> sink(64);
  for (auto _ : state) {
    pool.ParallelFor(static_cast<int64_t>(pool.num_threads()),
                     [&](int64_t begin, int64_t end) { sink[begin * 8] += end; });
  }
  benchmark::DoNotOptimize(sink.data());
}
BENCHMARK(BM_ParallelForOverhead)->Arg(1)->Arg(2)->UseRealTime();

// Decode attention: `batch` sequences of `context` tokens, one query row each, SmolLM2 layer
// shape (9 heads, 3 KV heads, head_dim 64), block size 16, shuffled block tables.
void BM_AttentionDecode(benchmark::State& state) {
  const int64_t context = state.range(0);
  const int64_t batch = state.range(1);
  ThreadPool& pool = Pool(static_cast<int>(state.range(2)));
  constexpr int kHeads = 9;
  constexpr int kBlockSize = 16;
  PagedAttentionParams params;
  params.num_heads = kHeads;
  params.scale = 0.125f;
  params.kv = PagedKvShape{batch * context / kBlockSize + 1, kBlockSize, 3, 64};
  const auto k_cache = RandomFloats(params.kv.PoolElements(), 3);
  const auto v_cache = RandomFloats(params.kv.PoolElements(), 4);
  std::vector<int32_t> ids(static_cast<size_t>(params.kv.num_blocks - 1));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i + 1);
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64(5));
  std::vector<AttentionSequence> seqs(static_cast<size_t>(batch));
  const int64_t blocks_per_seq = context / kBlockSize;
  for (int64_t s = 0; s < batch; ++s) {
    seqs[s].query_begin = s;
    seqs[s].num_query_tokens = 1;
    seqs[s].start_pos = static_cast<int32_t>(context - 1);
    seqs[s].block_table = std::span<const int32_t>(ids.data() + s * blocks_per_seq,
                                                   static_cast<size_t>(blocks_per_seq));
  }
  const auto q = RandomFloats(static_cast<size_t>(batch * kHeads * 64), 6);
  AlignedVector<float> out(q.size());
  for (auto _ : state) {
    PagedAttention(pool, params, q, k_cache, v_cache, seqs, out);
    benchmark::DoNotOptimize(out.data());
  }
  // K and V bytes read per step (each KV head is read by its 3 query heads; count once).
  const double kv_bytes = 2.0 * batch * context * params.kv.RowElements() * sizeof(float);
  state.counters["kvGB/s"] =
      benchmark::Counter(kv_bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionDecode)
    ->ArgNames({"ctx", "batch", "thr"})
    ->ArgsProduct({{80, 512, 2048}, {1, 8}, {1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Sampler at vocab 49152 on logits shaped like a model's (normal noise plus a few peaks).
// Arg: 0 greedy, 1 T=0.8 full vocab, 2 top_k=40, 3 top_p=0.9, 4 top_k=50+top_p=0.95+min_p=0.05,
// 5 T=0.8 with penalties (64 prompt + 256 generated tokens) and 5 logprobs.
void BM_Sampler(benchmark::State& state) {
  constexpr int kVocab = 49152;
  std::mt19937_64 rng(8);
  std::normal_distribution<float> noise(0.0f, 2.0f);
  std::vector<float> logits(kVocab);
  for (float& v : logits) v = noise(rng);
  for (int i = 0; i < 20; ++i) logits[(i * 2477) % kVocab] = 12.0f - i * 0.3f;
  sampling::SamplingParams p;
  p.temperature = 0.8f;
  std::vector<int32_t> prompt;
  const char* names[] = {"greedy", "T=0.8", "top_k=40", "top_p=0.9", "k50+p0.95+minp0.05",
                         "penalties+logprobs5"};
  switch (state.range(0)) {
    case 0: p.temperature = 0.0f; break;
    case 2: p.top_k = 40; break;
    case 3: p.top_p = 0.9f; break;
    case 4: p.top_k = 50; p.top_p = 0.95f; p.min_p = 0.05f; break;
    case 5:
      p.repetition_penalty = 1.1f;
      p.frequency_penalty = 0.3f;
      p.presence_penalty = 0.2f;
      p.num_logprobs = 5;
      for (int i = 0; i < 64; ++i) prompt.push_back((i * 769) % kVocab);
      break;
    default: break;
  }
  worker::Sampler base(p, kVocab, prompt);
  for (int i = 0; i < 256 && state.range(0) == 5; ++i) base.RecordGenerated((i * 313) % kVocab);
  // Every iteration samples from the same state (Sample records its token, which would grow the
  // penalty state and drift the RNG): copy the sampler outside the timed region.
  for (auto _ : state) {
    state.PauseTiming();
    worker::Sampler sampler = base;
    state.ResumeTiming();
    benchmark::DoNotOptimize(sampler.Sample(logits));
  }
  state.SetLabel(names[state.range(0)]);
}
BENCHMARK(BM_Sampler)->DenseRange(0, 5)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tessera::kernels::cpu
