// The streaming decode path (kernels/cuda/packed_linear_stream.cuh) on the Llama-3.1-8B batch-1
// shapes, for a user with an NVIDIA GPU; part of tessera-cuda-kernels-bench:
//   build/bin/tessera-cuda-kernels-bench --benchmark_filter=BM_PackedStreamShapes
// It compares the split and register-cap choices the worker could make, on one machine in one
// run, so that a short lent-GPU session can pick between them:
//   config 0: the worker's (a register cap for 2 blocks per SM, a grid of 2 per SM, a block per
//             tile when the tiles fit);
//   config 1: the same kernel over every resident block even when the tiles fit (more warps
//             streaming at n = 4096, the o and down shapes; their tiles met in the workspace);
//   config 2: a register cap for 3 blocks per SM and a grid of 3 per SM, a block per tile when
//             the tiles fit;
//   config 3: config 2 over every resident block.
// chained 0 times one launch (L2 flushed first; its launch and drain included). chained 1 times
// a chain of programmatic dependent launches over copies of the weight that together exceed twice
// the L2 (each launch reads HBM, as in a decode step), per launch: the overlap a CUDA graph of
// the step gets. Counters: blocks (the grid), resident (blocks per SM the kernel's registers and
// shared memory allow), of_copy_bw. BM_PackedStreamSwiGlu: the MLP's SwiGlu as the GEMM's
// epilogue against a launch of its own.
#include <benchmark/benchmark.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "kernels/cuda/activations.cuh"
#include "kernels/cuda/cuda_launcher.h"
#include "kernels/cuda/packed_linear.cuh"
#include "tools/bench/cuda_bench_util.cuh"

namespace tessera::cuda {
namespace {

struct StreamConfig {
  int blocks_per_sm;  // the grid cap, and the kernel's register cap (kMinBlocks)
  PackedStreamGrid grid;
};

StreamConfig ConfigOf(int config) {
  const PackedStreamGrid grid = config % 2 == 0 ? PackedStreamGrid::kBlockPerTileWhenTilesFit
                                                : PackedStreamGrid::kEveryResidentBlock;
  return {config < 2 ? 2 : 3, grid};
}

// Launches the m = 1 streaming kernel of `kScheme` with the register cap of kMinBlocks blocks
// per SM (its shared memory allowed on first use); reports its residency in `resident`.
template <PackedScheme kScheme, int kMinBlocks>
void LaunchStream(CudaLauncher& launcher, const __nv_bfloat16* x, const PackedLinear& w,
                  __nv_bfloat16* y, const PackedStreamWorkspace& ws, int* resident) {
  constexpr auto kKernel = PackedLinearStreamKernel<__nv_bfloat16, kScheme, 1, kMinBlocks>;
  constexpr int kShared = kPackedStreamSharedBytes<kScheme, 1>;
  if (*resident == 0) {
    Check(launcher.AllowDynamicShared(kKernel, kShared), "AllowDynamicShared");
    Check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(resident, kKernel, kPackedStreamThreads,
                                                        kShared),
          "occupancy");
  }
  Check(LaunchPackedLinearStream<CudaLauncher, __nv_bfloat16, kScheme, kMinBlocks>(
            launcher, x, 1, w, y, ws),
        "PackedLinearStream");
}

template <PackedScheme kScheme>
void LaunchConfig(int blocks_per_sm, CudaLauncher& launcher, const __nv_bfloat16* x,
                  const PackedLinear& w, __nv_bfloat16* y, const PackedStreamWorkspace& ws,
                  int* resident) {
  if (blocks_per_sm == 2) return LaunchStream<kScheme, 2>(launcher, x, w, y, ws, resident);
  LaunchStream<kScheme, 3>(launcher, x, w, y, ws, resident);
}

// Packed n x k weights in the arena for a chain of launches: one, or (chained) enough copies
// that a chain over them reads HBM, twice the L2 in all; each copy's bytes in `weight_bytes`.
std::vector<PackedLinear> ChainWeights(DeviceArena& arena, PackedScheme scheme, int n, int k,
                                       bool chained, double* weight_bytes) {
  std::vector<PackedLinear> weights{ArenaPackedWeight(arena, scheme, n, k, weight_bytes)};
  int device = 0, l2 = 0;
  Check(cudaGetDevice(&device), "cudaGetDevice");
  Check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), "L2 size");
  const int copies = chained ? static_cast<int>(2.0 * l2 / *weight_bytes) + 1 : 1;
  while (static_cast<int>(weights.size()) < copies) {
    weights.push_back(ArenaPackedWeight(arena, scheme, n, k, weight_bytes));
  }
  return weights;
}

// Launches per timed iteration over `weights`: one, or (chained) at least 8 and every copy.
int ChainLaunches(const std::vector<PackedLinear>& weights, bool chained) {
  return chained ? std::max<int>(8, static_cast<int>(weights.size())) : 1;
}

// Scheme 1 (Q4_0) or 4 (NVFP4); n, k: q | k | v, o, gate | up, down; config and chained as the
// header says.
void BM_PackedStreamShapes(benchmark::State& state) {
  const auto scheme = static_cast<PackedScheme>(state.range(0));
  const int n = static_cast<int>(state.range(1)), k = static_cast<int>(state.range(2));
  const StreamConfig config = ConfigOf(static_cast<int>(state.range(3)));
  const bool chained = state.range(4) != 0;
  DeviceArena arena;
  double weight_bytes = 0;
  const std::vector<PackedLinear> weights =
      ChainWeights(arena, scheme, n, k, chained, &weight_bytes);
  const int launches = ChainLaunches(weights, chained);
  auto* x = static_cast<const __nv_bfloat16*>(arena.Get(size_t(k) * 2));
  auto* y = static_cast<__nv_bfloat16*>(arena.Get(size_t(n) * 2));
  PackedStreamWorkspace ws = StreamWorkspace(arena, config.blocks_per_sm);
  ws.grid = config.grid;
  CudaLauncher launcher(nullptr);
  int resident = 0;
  TimeKernel(
      state, weight_bytes + 2.0 * (k + n),
      [&] {
        for (int i = 0; i < launches; ++i) {
          const PackedLinear& w = weights[i % weights.size()];
          if (scheme == PackedScheme::kNvfp4) {
            LaunchConfig<PackedScheme::kNvfp4>(config.blocks_per_sm, launcher, x, w, y, ws,
                                               &resident);
          } else {
            LaunchConfig<PackedScheme::kQ4_0>(config.blocks_per_sm, launcher, x, w, y, ws,
                                              &resident);
          }
        }
      },
      launches);
  const int tiles = PackedStreamTiles(n, PackedStreamOutput::kProduct);
  const int stages = k / packed_stream::kStageInputs<PackedScheme::kQ4_0>;  // Q4_0 and NVFP4
  state.counters["blocks"] = PackedStreamBlocks(tiles, stages, ws.blocks, ws.grid);
  state.counters["resident"] = resident;
}
BENCHMARK(BM_PackedStreamShapes)
    ->ArgsProduct({{1, 4}, {6144, 28672}, {4096}, {0, 1, 2, 3}, {0, 1}})
    ->ArgsProduct({{1, 4}, {4096}, {4096, 14336}, {0, 1, 2, 3}, {0, 1}})
    ->ArgNames({"scheme", "n", "k", "config", "chained"})
    ->UseManualTime()->Unit(benchmark::kMicrosecond);

// The MLP's [gate | up] at batch 1 (Q4_0 or NVFP4, n = 2 x 14336, k = 4096), chained as above:
// fused 1, the SwiGlu as the streaming GEMM's epilogue (LaunchPackedLinearSwiGlu, what the worker
// runs at <= 4 rows); fused 0, the product then the SwiGlu kernel (two launches).
void BM_PackedStreamSwiGlu(benchmark::State& state) {
  const auto scheme = static_cast<PackedScheme>(state.range(0));
  const bool fused = state.range(1) != 0;
  constexpr int kWidth = 14336, kK = 4096;
  DeviceArena arena;
  double weight_bytes = 0;
  const std::vector<PackedLinear> weights =
      ChainWeights(arena, scheme, 2 * kWidth, kK, /*chained=*/true, &weight_bytes);
  const int launches = ChainLaunches(weights, /*chained=*/true);
  auto* x = static_cast<const __nv_bfloat16*>(arena.Get(size_t(kK) * 2));
  auto* gate_up = static_cast<__nv_bfloat16*>(arena.Get(size_t(2) * kWidth * 2));
  auto* out = static_cast<__nv_bfloat16*>(arena.Get(size_t(kWidth) * 2));
  const PackedStreamWorkspace ws = StreamWorkspace(arena, kPackedStreamBlocksPerSm);
  CudaLauncher launcher(nullptr);
  Check(AllowPackedLinearSharedMemory<__nv_bfloat16>(launcher), "AllowPackedLinearSharedMemory");
  TimeKernel(
      state, weight_bytes + 2.0 * (kK + kWidth),
      [&] {
        for (int i = 0; i < launches; ++i) {
          const PackedLinear& w = weights[i % weights.size()];
          if (fused) {
            Check(LaunchPackedLinearSwiGlu(launcher, x, 1, w, out, ws), "PackedLinearSwiGlu");
            continue;
          }
          Check(LaunchPackedLinear(launcher, x, 1, w, gate_up, ws), "PackedLinear");
          Check(LaunchSwiGluFused(launcher, static_cast<const __nv_bfloat16*>(gate_up), out, 1,
                                  kWidth),
                "SwiGlu");
        }
      },
      launches);
}
BENCHMARK(BM_PackedStreamSwiGlu)
    ->ArgsProduct({{1, 4}, {0, 1}})
    ->ArgNames({"scheme", "fused"})
    ->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tessera::cuda
