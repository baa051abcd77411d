// GPU kernel benchmark (Google Benchmark), for a user with an NVIDIA GPU:
//   build/bin/tessera-cuda-kernels-bench [--benchmark_filter=...] [--benchmark_format=json]
// Each kernel reports the bytes it must move (bytes_per_second) and that rate as a fraction of
// the device's measured copy bandwidth (of_copy_bw): a memory-bound kernel near 1.0 is at its
// bound. Before every timed iteration the L2 cache is flushed (a write of twice its size), so
// the numbers are HBM's, not the cache's. The two ceilings everything is compared with are
// measured here too: BM_CopyBandwidth (device-to-device copy, read + write counted) and
// BM_GemmBf16 (cuBLAS bf16 GEMM, f32 accumulation, as the runner calls it, on random operands;
// TFLOP/s). Times come from CUDA events around each launch. Without a usable GPU it prints the
// reason and exits 0 having run nothing; it never claims a number it did not measure.
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/cuda/activations.cuh"
#include "kernels/cuda/batch_invariant_gemm.cuh"
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/cuda/moe_grouped_gemm.cuh"
#include "kernels/cuda/moe_routing.cuh"
#include "kernels/cuda/packed_dequantize.cuh"
#include "kernels/cuda/packed_linear.cuh"
#include "kernels/cuda/paged_decode_attention.cuh"
#include "kernels/cuda/paged_prefill_attention.cuh"
#include "kernels/cuda/rms_norm.cuh"
#include "kernels/cuda/sampling.cuh"
#include "kernels/cuda/sampling_reference.h"
#include "tools/bench/cuda_bench_util.cuh"

namespace tessera::cuda {
namespace {

// The reference: device-to-device copy of 256 MiB (read + write counted).
void BM_CopyBandwidth(benchmark::State& state) {
  const size_t bytes = size_t{256} << 20;
  DeviceArena arena;
  void* source = arena.Get(bytes);
  void* destination = arena.Get(bytes);
  TimeKernel(state, 2.0 * bytes, [&] {
    Check(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToDevice), "copy");
  });
}
BENCHMARK(BM_CopyBandwidth)->UseManualTime()->Unit(benchmark::kMicrosecond);

// RMSNorm with residual, bf16: reads x, residual, weight; writes residual, out.
void BM_RmsNormResidual(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0)), hidden = static_cast<int>(state.range(1));
  const size_t elements = size_t(rows) * hidden;
  DeviceArena arena;
  auto* x = static_cast<__nv_bfloat16*>(arena.Get(elements * 2));
  auto* residual = static_cast<__nv_bfloat16*>(arena.Get(elements * 2));
  auto* weight = static_cast<__nv_bfloat16*>(arena.Get(size_t(hidden) * 2));
  auto* out = static_cast<__nv_bfloat16*>(arena.Get(elements * 2));
  CudaLauncher launcher(nullptr);
  TimeKernel(state, 2.0 * (4 * elements + hidden), [&] {
    Check(LaunchRmsNorm(launcher, static_cast<const __nv_bfloat16*>(x), residual,
                        static_cast<const __nv_bfloat16*>(weight), out, rows, hidden, 1e-5f),
          "RmsNorm");
  });
}
BENCHMARK(BM_RmsNormResidual)
    ->Args({1, 4096})->Args({128, 4096})->Args({2048, 4096})
    ->UseManualTime()->Unit(benchmark::kMicrosecond);

// Paged decode attention, bf16, head_dim 128, 32 query / 8 KV heads, block size 16: every
// sequence at the same context; bytes = K and V of every context token (q/out are negligible).
// Third argument 1: planned as a graph-shaped step is (max_context_len = 131,072, the model's
// context), as the runner launches every decode-only step; 0: at the step's own context.
void BM_PagedDecodeAttention(benchmark::State& state) {
  const int num_seqs = static_cast<int>(state.range(0)), context = static_cast<int>(state.range(1));
  const int planned_context = state.range(2) != 0 ? 131072 : context;
  constexpr int kHeadDim = 128, kHeads = 32, kKvHeads = 8, kBlock = 16;
  const int blocks_per_seq = (context + kBlock - 1) / kBlock;
  const size_t pool_rows = size_t(num_seqs) * blocks_per_seq * kBlock + kBlock;  // + null block
  DeviceArena arena;
  auto* q = static_cast<__nv_bfloat16*>(arena.Get(size_t(num_seqs) * kHeads * kHeadDim * 2));
  auto* out = static_cast<__nv_bfloat16*>(arena.Get(size_t(num_seqs) * kHeads * kHeadDim * 2));
  auto* k_pool = static_cast<__nv_bfloat16*>(arena.Get(pool_rows * kKvHeads * kHeadDim * 2));
  auto* v_pool = static_cast<__nv_bfloat16*>(arena.Get(pool_rows * kKvHeads * kHeadDim * 2));
  std::vector<int32_t> tables(size_t(num_seqs) * blocks_per_seq), lens(num_seqs, context);
  for (size_t i = 0; i < tables.size(); ++i) tables[i] = static_cast<int32_t>(i + 1);
  auto* d_tables = static_cast<int32_t*>(arena.Get(tables.size() * 4));
  auto* d_lens = static_cast<int32_t*>(arena.Get(lens.size() * 4));
  Check(cudaMemcpy(d_tables, tables.data(), tables.size() * 4, cudaMemcpyHostToDevice), "copy");
  Check(cudaMemcpy(d_lens, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice), "copy");
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  const PagedDecodeParams params{.num_seqs = num_seqs, .num_heads = kHeads,
                                 .num_kv_heads = kKvHeads, .block_size = kBlock,
                                 .max_blocks_per_seq = blocks_per_seq,
                                 .max_context_len = planned_context,
                                 .scale = 0.088f, .num_sms = prop.multiProcessorCount};
  const size_t workspace_floats = PagedDecodeWorkspaceFloats(params, kHeadDim);
  auto* workspace = static_cast<float*>(arena.Get(std::max<size_t>(workspace_floats, 1) * 4));
  Check(cudaMemset(workspace, 0, std::max<size_t>(workspace_floats, 1) * 4), "zero workspace");
  CudaLauncher launcher(nullptr);
  TimeKernel(state, 2.0 * num_seqs * context * kKvHeads * kHeadDim * 2, [&] {
    Check(LaunchPagedDecodeAttention<CudaLauncher, __nv_bfloat16, kHeadDim>(
              launcher, params, q, k_pool, v_pool, d_tables, d_lens, out, workspace),
          "PagedDecodeAttention");
  });
}
BENCHMARK(BM_PagedDecodeAttention)
    ->Args({1, 512, 1})->Args({1, 2048, 0})->Args({1, 2048, 1})->Args({32, 2048, 1})
    ->Args({128, 1024, 1})->Args({8, 16384, 1})
    ->UseManualTime()->Unit(benchmark::kMicrosecond);

// Paged prefill attention (the tensor-core kernel), bf16, head_dim 128, 32 query / 8 KV heads,
// block size 16: one sequence's whole prompt of `tokens`, causal. FLOPs = 4 x head_dim x heads x
// Σ causal pairs; TFLOP/s against the GEMM rate (design target >= 35% of the dense bf16 peak).
void BM_PagedPrefillAttention(benchmark::State& state) {
  const int tokens = static_cast<int>(state.range(0));
  constexpr int kHeadDim = 128, kHeads = 32, kKvHeads = 8, kBlock = 16;
  const int blocks = (tokens + kBlock - 1) / kBlock;
  const size_t pool_rows = size_t(blocks + 1) * kBlock;
  DeviceArena arena;
  auto* q = static_cast<__nv_bfloat16*>(arena.Get(size_t(tokens) * kHeads * kHeadDim * 2));
  auto* out = static_cast<__nv_bfloat16*>(arena.Get(size_t(tokens) * kHeads * kHeadDim * 2));
  auto* k_pool = static_cast<__nv_bfloat16*>(arena.Get(pool_rows * kKvHeads * kHeadDim * 2));
  auto* v_pool = static_cast<__nv_bfloat16*>(arena.Get(pool_rows * kKvHeads * kHeadDim * 2));
  std::vector<int32_t> table(blocks), start = {0, tokens}, lens = {tokens};
  for (int i = 0; i < blocks; ++i) table[i] = i + 1;
  auto* d_table = static_cast<int32_t*>(arena.Get(table.size() * 4));
  auto* d_start = static_cast<int32_t*>(arena.Get(start.size() * 4));
  auto* d_lens = static_cast<int32_t*>(arena.Get(lens.size() * 4));
  Check(cudaMemcpy(d_table, table.data(), table.size() * 4, cudaMemcpyHostToDevice), "copy");
  Check(cudaMemcpy(d_start, start.data(), start.size() * 4, cudaMemcpyHostToDevice), "copy");
  Check(cudaMemcpy(d_lens, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice), "copy");
  const PagedPrefillParams params{.num_seqs = 1, .num_heads = kHeads, .num_kv_heads = kKvHeads,
                                  .block_size = kBlock, .max_blocks_per_seq = blocks,
                                  .max_query_len = tokens, .scale = 0.088f};
  CudaLauncher launcher(nullptr);
  const double pairs = double(tokens) * (tokens + 1) / 2;
  TimeKernel(state, 2.0 * tokens * kKvHeads * kHeadDim * 2, [&] {
    Check(LaunchPagedPrefillAttention<CudaLauncher, __nv_bfloat16, kHeadDim>(
              launcher, params, q, k_pool, v_pool, d_table, d_start, d_lens, out),
          "PagedPrefillAttention");
  });
  state.counters["TFLOP/s"] = benchmark::Counter(4.0 * kHeadDim * kHeads * pairs *
                                                     state.iterations() / 1e12,
                                                 benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PagedPrefillAttention)
    ->Arg(512)->Arg(4096)
    ->UseManualTime()->Unit(benchmark::kMicrosecond);

// SwiGLU from a fused gate_up, bf16: 3 x width x 2 bytes per token.
void BM_SwiGlu(benchmark::State& state) {
  const int tokens = static_cast<int>(state.range(0)), width = 14336;
  DeviceArena arena;
  auto* gate_up = static_cast<__nv_bfloat16*>(arena.Get(size_t(tokens) * width * 4));
  auto* out = static_cast<__nv_bfloat16*>(arena.Get(size_t(tokens) * width * 2));
  CudaLauncher launcher(nullptr);
  TimeKernel(state, 3.0 * tokens * width * 2, [&] {
    Check(LaunchSwiGluFused(launcher, static_cast<const __nv_bfloat16*>(gate_up), out, tokens,
                            width),
          "SwiGlu");
  });
}
BENCHMARK(BM_SwiGlu)->Arg(1)->Arg(512)->Arg(4096)->UseManualTime()->Unit(benchmark::kMicrosecond);

// Uniform values in [-1, 1) from an integer hash of (seed, index): random operands, since a
// constant or zero matrix can run faster than real data.
__global__ void FillRandomBf16(__nv_bfloat16* out, size_t count, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u ^ seed;
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    out[i] = __float2bfloat16(static_cast<float>(h >> 8) * 0x1.0p-23f - 1.0f);
  }
}

// cuBLAS bf16 GEMM with f32 accumulation (the runner's Project at prefill sizes): the tensor-
// core ceiling. m = tokens, n = k = 8192; 2 m n k FLOP per launch.
void BM_GemmBf16(benchmark::State& state) {
  const int m = static_cast<int>(state.range(0)), n = 8192, k = 8192;
  DeviceArena arena;
  void* a = arena.Get(size_t(m) * k * 2);
  void* b = arena.Get(size_t(n) * k * 2);
  void* c = arena.Get(size_t(m) * n * 2);
  FillRandomBf16<<<1024, 256>>>(static_cast<__nv_bfloat16*>(a), size_t(m) * k, 1);
  FillRandomBf16<<<1024, 256>>>(static_cast<__nv_bfloat16*>(b), size_t(n) * k, 2);
  Check(cudaGetLastError(), "FillRandomBf16");
  cublasHandle_t handle = nullptr;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
    state.SkipWithError("cublasCreate failed");
    return;
  }
  void* workspace = arena.Get(size_t{32} << 20);
  cublasSetWorkspace(handle, workspace, size_t{32} << 20);
  const float alpha = 1.0f, beta = 0.0f;
  bool failed = false;
  // Bytes: a, b and c once each (the floor, far below what the FLOP rate needs).
  TimeKernel(state, 2.0 * (double(m) * k + double(n) * k + double(m) * n), [&] {
    failed |= cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, b, CUDA_R_16BF, k,
                           a, CUDA_R_16BF, k, &beta, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS;
  });
  if (failed) state.SkipWithError("cublasGemmEx failed");
  state.counters["TFLOP/s"] = benchmark::Counter(2.0 * m * n * k * state.iterations() / 1e12,
                                                 benchmark::Counter::kIsRate);
  cublasDestroy(handle);
}
BENCHMARK(BM_GemmBf16)
    ->Arg(8192)
    ->Arg(512)
    ->Arg(16)
    ->Arg(1)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// The batch-invariant mode's GEMM (batch_invariant_gemm_tc.cuh: the narrow tile for m <= 16,
// the wide one above) at BM_GemmBf16's shapes, so each row has its cuBLAS row: item 2's budget
// is the mode at <= 1.5x the default mode's time.
void BM_BatchInvariantGemmBf16(benchmark::State& state) {
  const int m = static_cast<int>(state.range(0)), n = 8192, k = 8192;
  DeviceArena arena;
  auto* a = static_cast<__nv_bfloat16*>(arena.Get(size_t(m) * k * 2));
  auto* b = static_cast<__nv_bfloat16*>(arena.Get(size_t(n) * k * 2));
  auto* c = static_cast<__nv_bfloat16*>(arena.Get(size_t(m) * n * 2));
  FillRandomBf16<<<1024, 256>>>(a, size_t(m) * k, 1);
  FillRandomBf16<<<1024, 256>>>(b, size_t(n) * k, 2);
  Check(cudaGetLastError(), "FillRandomBf16");
  CudaLauncher launcher(nullptr);
  TimeKernel(state, 2.0 * (double(m) * k + double(n) * k + double(m) * n), [&] {
    Check(LaunchBatchInvariantGemm(launcher, static_cast<const __nv_bfloat16*>(a),
                                   static_cast<const __nv_bfloat16*>(b), c, m, n, k),
          "BatchInvariantGemm");
  });
  state.counters["TFLOP/s"] = benchmark::Counter(2.0 * m * n * k * state.iterations() / 1e12,
                                                 benchmark::Counter::kIsRate);
}
BENCHMARK(BM_BatchInvariantGemmBf16)
    ->Arg(8192)
    ->Arg(512)
    ->Arg(16)
    ->Arg(1)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// The MoE FFN's routed half at Qwen3-Next widths (hidden 2048, expert ffn 512, 512 experts,
// top-10), bf16 dense expert stacks, `n` tokens: routing + grouping (moe_routing.cuh), then the
// gate, up, SwiGLU and down grouped GEMMs (moe_grouped_gemm.cuh). The arena's constant router
// logits send every token to the same 10 experts, so bytes = 10 experts' three matrices (the
// decode floor; a real batch touches more experts). A lead for the hybrid decode rows.
void BM_MoeExperts(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  constexpr int kHidden = 2048, kFfn = 512, kExperts = 512, kTopK = 10;
  const int slots = n * kTopK, tiles = MoeMaxRowTiles(slots, kExperts);
  DeviceArena arena;
  auto* logits = static_cast<float*>(arena.Get(size_t(n) * kExperts * 4));
  auto* expert_ids = static_cast<int32_t*>(arena.Get(size_t(slots) * 4));
  auto* weights = static_cast<float*>(arena.Get(size_t(slots) * 4));
  MoeGroupsView view{static_cast<int32_t*>(arena.Get((kExperts + 1) * 4)),
                     static_cast<int32_t*>(arena.Get(size_t(slots) * 4)),
                     static_cast<int32_t*>(arena.Get(size_t(slots) * 4)),
                     static_cast<int32_t*>(arena.Get(size_t(tiles) * 4)),
                     static_cast<int32_t*>(arena.Get(size_t(tiles) * 4))};
  const size_t matrix = size_t(kFfn) * kHidden;
  auto stack = [&] {
    return ExpertStack<__nv_bfloat16>{
        static_cast<const __nv_bfloat16*>(arena.Get(kExperts * matrix * 2))};
  };
  MoeExpertsArgs<__nv_bfloat16, float> args{
      .x = static_cast<const __nv_bfloat16*>(arena.Get(size_t(n) * kHidden * 2)),
      .gate_w = stack(), .up_w = stack(), .down_w = stack(),
      .gate = static_cast<__nv_bfloat16*>(arena.Get(size_t(slots) * kFfn * 2)),
      .up = static_cast<__nv_bfloat16*>(arena.Get(size_t(slots) * kFfn * 2)),
      .y = static_cast<float*>(arena.Get(size_t(slots) * kHidden * 4)),
      .num_tokens = n, .k = kTopK, .num_experts = kExperts, .hidden = kHidden, .ffn = kFfn};
  const MoeGemmGroups groups{view.offsets, view.row_tokens, view.tile_expert, view.tile_row0};
  CudaLauncher launcher(nullptr);
  TimeKernel(state, 3.0 * kTopK * matrix * 2, [&] {
    Check(LaunchMoeRouting(launcher, logits, n, kExperts, kTopK, true, expert_ids, weights, view),
          "MoeRouting");
    Check(LaunchMoeExperts(launcher, groups, args), "MoeExperts");
  });
}
BENCHMARK(BM_MoeExperts)->Arg(1)->Arg(8)->Arg(64)->UseManualTime()->Unit(benchmark::kMicrosecond);

// The device sampler over f32 logits [rows, vocab 151936] (Qwen2.5's vocab), by the second
// argument: 0 greedy (one split pass); 1 temperature + top-p with logprobs over the arena's
// constant fill (every logit equal: too many candidates, so the full passes, one histogram bin);
// 2 the same over reference::HeadLikeLogits (top-p 0.95 keeps 1 to ~12,000 ids, median ~850:
// many rows exceed the candidate path); 3 peaked: those logits with every value above 5 raised by
// a further 10 (they hold all but ~2e-6 of the mass; top-p 0.95 keeps 1 to ~300 ids, median
// ~65, as a confident LM head gives). Bytes = one read of the logits (the first pass's floor;
// sampling.cuh gives the passes); counters say which path the rows took.
void BM_Sampling(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0)), vocab = 151936;
  const bool greedy = state.range(1) == 0;
  DeviceArena arena;
  auto* logits = static_cast<float*>(arena.Get(size_t(rows) * vocab * 4));
  if (state.range(1) >= 2) {
    std::mt19937 rng(7);  // a fixed seed
    std::vector<float> head_like = reference::HeadLikeLogits(rows, vocab, rng);
    if (state.range(1) == 3) {
      for (float& z : head_like) z = z > 5.0f ? z + 10.0f : z;
    }
    Check(cudaMemcpy(logits, head_like.data(), head_like.size() * 4, cudaMemcpyHostToDevice),
          "copy");
  }
  std::vector<SamplingRowParams> params(rows);
  for (int r = 0; r < rows; ++r) {
    params[r].temperature = greedy ? 0.0f : 0.8f;
    params[r].top_p = greedy ? 1.0f : 0.95f;
    params[r].num_logprobs = greedy ? 0 : 5;
    params[r].seed = 1234 + r;
    params[r].position = r;
  }
  auto* d_params = static_cast<SamplingRowParams*>(arena.Get(rows * sizeof(SamplingRowParams)));
  Check(cudaMemcpy(d_params, params.data(), rows * sizeof(SamplingRowParams),
                   cudaMemcpyHostToDevice), "copy");
  auto* tokens = static_cast<int32_t*>(arena.Get(rows * 4));
  auto* logprobs = static_cast<float*>(arena.Get(rows * 4));
  auto* top_ids = static_cast<int32_t*>(arena.Get(size_t(rows) * kSamplingMaxLogprobs * 4));
  auto* top_lp = static_cast<float*>(arena.Get(size_t(rows) * kSamplingMaxLogprobs * 4));
  const SamplingOutputs out{tokens, logprobs, top_ids, top_lp, nullptr};
  void* workspace = arena.Get(SamplingWorkspaceBytes(rows, vocab));
  CudaLauncher launcher(nullptr);
  Check(AllowSamplingSharedMemory(launcher, vocab), "AllowSamplingSharedMemory");
  TimeKernel(state, double(rows) * vocab * 4, [&] {
    Check(LaunchSampling(launcher, logits, rows, vocab, d_params, SamplingPenalties{}, out,
                         workspace),
          "Sampling");
  });
  // Rows the finish served from candidates (the rest: statistics only, or the full passes).
  std::vector<int32_t> paths(rows);
  Check(cudaMemcpy(paths.data(), SamplingWorkspaceAt(workspace, rows, vocab).paths, rows * 4,
                   cudaMemcpyDeviceToHost),
        "paths");
  state.counters["candidate_rows"] = static_cast<double>(std::count(
      paths.begin(), paths.end(), static_cast<int32_t>(SamplingPath::kCandidates)));
  state.counters["full_rows"] = static_cast<double>(std::count(
      paths.begin(), paths.end(), static_cast<int32_t>(SamplingPath::kFullRows)));
}
BENCHMARK(BM_Sampling)
    ->Args({1, 0})->Args({64, 0})->Args({64, 1})->Args({256, 1})->Args({1, 2})->Args({64, 2})
    ->Args({256, 2})->Args({1, 3})->Args({64, 3})->Args({256, 3})
    ->UseManualTime()->Unit(benchmark::kMicrosecond);

// Linear layer over a packed weight (packed_linear.cuh), bf16 activations, n = 4096, one row
// per scheme (0 Q8_0, 1 Q4_0, 2 Q4_1, 3 Q4_K, 4 NVFP4, 5 MXFP4), m and k (4096; 14336 at m = 1,
// an MLP down projection), path (0: the dispatch, LaunchPackedLinear; 1: the CUDA-core small-m
// path, m <= 8; 2: the tensor-core decode path, m <= 16; 3: the streaming path, m <= 4): bytes =
// the packed weight (codes, scales, mins, super-scales) + x + y. m <= 16 is bandwidth-bound
// (of_copy_bw; the design target is >= 0.85 of HBM), m = 256 compute (TFLOP/s). The arena's 0x3C
// fill is a valid code and scale pattern for every scheme.
void BM_PackedLinear(benchmark::State& state) {
  const auto scheme = static_cast<PackedScheme>(state.range(0));
  const int m = static_cast<int>(state.range(1)), n = 4096, k = static_cast<int>(state.range(2));
  const int path = static_cast<int>(state.range(3));
  DeviceArena arena;
  double weight_bytes = 0;
  const PackedLinear w = ArenaPackedWeight(arena, scheme, n, k, &weight_bytes);
  auto* x = static_cast<const __nv_bfloat16*>(arena.Get(size_t(m) * k * 2));
  auto* y = static_cast<__nv_bfloat16*>(arena.Get(size_t(m) * n * 2));
  const PackedStreamWorkspace ws = StreamWorkspace(arena, kPackedStreamBlocksPerSm);
  CudaLauncher launcher(nullptr);
  Check(AllowPackedLinearSharedMemory<__nv_bfloat16>(launcher), "AllowPackedLinearSharedMemory");
  TimeKernel(state, weight_bytes + 2.0 * m * (k + n), [&] {
    if (path == 0) return Check(LaunchPackedLinear(launcher, x, m, w, y, ws), "PackedLinear");
    switch (scheme) {
#define TESSERA_BENCH_SMALL_M(S)                                                               \
  case PackedScheme::S:                                                                        \
    if (path == 1) {                                                                           \
      return Check(LaunchPackedLinearSmallM<CudaLauncher, __nv_bfloat16, PackedScheme::S>(     \
                       launcher, x, m, w, y),                                                  \
                   "PackedLinearSmallM");                                                      \
    }                                                                                          \
    if (path == 3) {                                                                           \
      return Check(LaunchPackedLinearStream<CudaLauncher, __nv_bfloat16, PackedScheme::S>(     \
                       launcher, x, m, w, y, ws),                                              \
                   "PackedLinearStream");                                                      \
    }                                                                                          \
    return Check(                                                                              \
        LaunchPackedLinearTc<CudaLauncher, __nv_bfloat16, PackedScheme::S>(launcher, x, m, w, y), \
        "PackedLinearTc");
      TESSERA_BENCH_SMALL_M(kQ8_0)
      TESSERA_BENCH_SMALL_M(kQ4_0)
      TESSERA_BENCH_SMALL_M(kQ4_1)
      TESSERA_BENCH_SMALL_M(kQ4_K)
      TESSERA_BENCH_SMALL_M(kNvfp4)
      TESSERA_BENCH_SMALL_M(kMxfp4)
#undef TESSERA_BENCH_SMALL_M
    }
  });
  state.counters["TFLOP/s"] = benchmark::Counter(2.0 * m * n * k * state.iterations() / 1e12,
                                                 benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PackedLinear)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5}, {1, 8, 16, 256}, {4096}, {0}})
    ->ArgsProduct({{0, 1, 2, 3, 4, 5}, {1}, {14336}, {0, 2}})
    ->ArgsProduct({{1, 4}, {1, 2, 4, 8}, {4096}, {1, 2}})
    ->ArgsProduct({{1, 4}, {1, 4}, {4096, 14336}, {1, 3}})
    ->ArgNames({"scheme", "m", "k", "path"})
    ->UseManualTime()->Unit(benchmark::kMicrosecond);

// The packed weight dequantized to bf16 (packed_dequantize.cuh; the runner's path for m > 16),
// n = 4096, k = 14336: bytes = the packed weight read + the bf16 matrix written.
void BM_PackedDequantize(benchmark::State& state) {
  const auto scheme = static_cast<PackedScheme>(state.range(0));
  const int n = 4096, k = 14336;
  DeviceArena arena;
  const size_t bytes = PackedWeightBytes(scheme, n, k);
  const size_t groups = size_t(n) * (k / PackedGroupSize(scheme));
  PackedLinear w{scheme, n, k,
                 static_cast<const uint8_t*>(arena.Get(size_t(n) * PackedRowCodeBytes(scheme, k))),
                 static_cast<const uint8_t*>(arena.Get(groups * PackedScaleBytes(scheme))),
                 static_cast<const uint8_t*>(arena.Get(groups * 2 + 16)),
                 static_cast<const uint16_t*>(arena.Get(size_t(n) * (k / 256) * 4 + 16)), 1.0f};
  auto* out = static_cast<__nv_bfloat16*>(arena.Get(size_t(n) * k * 2));
  CudaLauncher launcher(nullptr);
  TimeKernel(state, double(bytes) + 2.0 * n * k,
             [&] { Check(LaunchPackedDequantize(launcher, w, out), "PackedDequantize"); });
}
BENCHMARK(BM_PackedDequantize)->Arg(1)->Arg(4)->ArgName("scheme")
    ->UseManualTime()->Unit(benchmark::kMicrosecond);

// Measures copy bandwidth once before the kernels are compared with it.
bool MeasureCopyBandwidth() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    std::printf("tessera-cuda-kernels-bench: no CUDA GPU (%s); nothing measured\n",
                cudaGetErrorString(error));
    return false;
  }
  const size_t bytes = size_t{256} << 20;
  DeviceArena arena;
  void* source = arena.Get(bytes);
  void* destination = arena.Get(bytes);
  cudaEvent_t start, stop;
  Check(cudaEventCreate(&start), "cudaEventCreate");
  Check(cudaEventCreate(&stop), "cudaEventCreate");
  Check(cudaMemcpy(destination, source, bytes, cudaMemcpyDeviceToDevice), "copy");
  Check(cudaEventRecord(start), "record");
  for (int i = 0; i < 10; ++i) cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToDevice);
  Check(cudaEventRecord(stop), "record");
  Check(cudaEventSynchronize(stop), "sync");
  float milliseconds = 0;
  Check(cudaEventElapsedTime(&milliseconds, start, stop), "elapsed");
  copy_bandwidth_bytes_per_second = 10 * 2.0 * bytes / (milliseconds / 1000.0);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s, measured copy bandwidth %.0f GB/s\n", prop.name,
              copy_bandwidth_bytes_per_second / 1e9);
  return true;
}

}  // namespace
}  // namespace tessera::cuda

int main(int argc, char** argv) {
  if (!tessera::cuda::MeasureCopyBandwidth()) return 0;
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
