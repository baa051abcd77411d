// Linear layers over packed weights: Y[m, n] = Σ_k X[m, k]·W[n, k] (Y = X·Wᵀ), W kept in its
// quantized codes and group scales (packed_format.h: Q8_0, Q4_0, Q4_1, Q4_K, NVFP4, MXFP4), X
// and Y of T (bf16 or f16), f32 accumulation, one rounding of each output to T. Four paths,
// chosen by m (LaunchPackedLinear):
//   m <= 4  packed_linear_stream.cuh: tensor cores over codes streamed through shared memory,
//           when k is a multiple of 128 (64 for Q8_0); else
//   m <= 4  packed_linear_small_m.cuh: CUDA cores (it serves m <= 8; faster up to m = 4 today).
//   m <= 16 packed_linear_tc.cuh: tensor cores over codes decoded in registers.
//   m > 16  packed_linear_mma.cuh: tensor cores (mma.sync m16n8k16 in T, f32 accumulate) over
//           shared-memory tiles.
// All compute, per group of G inputs, s·Σ_k x_k·c_k (+ min·Σ_k x_k) with c the code's small
// integer value and (s, min) the group's scale and min (packed_decode.cuh): the codes are never
// rounded, the scale is applied in f32. Error against the exact Σ x·w (f64 over the f32
// weights of DequantizePacked): the rounding of y to T plus f32 summation (at most one ulp per
// addition, as tensor cores may truncate), within
//   |y − ref| <= u_T·|ref| + (k + 64)·2^-23·Σ_k |x_k|·(|s·c_k| + |min|)·tensor_scale,
// u_bf16 = 2^-8, u_f16 = 2^-11 (tests/unit/cuda/packed_linear_kernel_test.cc checks this).
//
// Bound, small-m path (H100 SXM: 3.35 TB/s HBM3, 132 SMs at 1.755 GHz). Time >= weight bytes ÷
// bandwidth, weight bytes = n·k·(bits / 8 + scale bytes / G): Q4_0 at n = k = 4096 is 9.4 MB,
// 2.8 µs; X (m·k·2 bytes, once per block from L2) and Y are negligible. Design target: weight
// bytes ÷ time >= 85% of HBM bandwidth at m = 1 for n, k >= 4096. Why it can get there:
//  - every weight byte is read once, as 512 contiguous bytes per warp and row (16 per lane), and
//    every scale once, 64 contiguous bytes per warp (the planar layout);
//  - n / 16 blocks of 8 warps (256 blocks at n = 4096, ~2 per SM) each keep the next 4 steps
//    (2 for m > 2) of 2 rows x 16 bytes of codes, with their scales, in flight per lane: at
//    m <= 2 and k = 4096 a lane's whole row share, ~64 KB per SM (Little's law needs
//    ~3.35 TB/s x ~0.8 µs / 132 ≈ 20 KB);
//  - per 4-bit input at m = 1: ~2 integer ops (shift, mask | exponent), 1 FADD and 1 FFMA (no
//    int->float conversion, packed_decode.cuh); full bandwidth asks 29 inputs per SM per clock,
//    i.e. ~58 of the SM's 64 integer ops/clock and ~58 of its 128 FP32 ops/clock, and 2 bytes
//    of shared-memory reads per input (X, shared by the warp's 2 rows): 45% of its bandwidth.
// The integer pipe is the margin: if it caps the rate, the decode is the place to optimise
// (byte permutes, two codes per instruction). At n = k = 4096 the 2.8 µs ideal is close to the
// fixed costs (launch, the first X staging, the tail), so expect 85% from larger weights
// (n·k >= 4096 x 14336) and less at 4096 x 4096. For m = 2..8 the same bytes feed m times the
// FMAs and shared reads: at m = 8 the FP32 pipe (8 FFMA per input) bounds it near 50-60% of
// bandwidth; beyond that the tensor-core path takes over.
// Tensor-core path: every X tile is read n / 64 times and every W tile m / 64 times (from L2);
// per 8 mma a warp spends ~60 other instructions (code decode, per-group scaling), so it is
// issue-bound well below the tensor cores' peak: expect 15-30% of H100's dense bf16 mma.sync
// rate; at m <= 64 its n / 64 blocks (64 at n = 4096) under-fill the SMs (split-k is the next
// step); a correct tensor-core baseline to tune.
// Measured (H200, copy bandwidth 4.1 TB/s; one launch between events, L2 flushed; bf16; tables
// in docs/perf/nvfp4.md): the small-m path is issue-bound, not latency-bound: ncu counts 7.2
// (Q4_0) to 13.1 (NVFP4) instructions per weight at 0.64 issued per scheduler cycle, 0.30 / 0.19
// of the copy bandwidth at m = 1, k = 14336. The tensor-core decode path (packed_linear_tc.cuh)
// takes m = 8 in half the small-m time and m = 16 in a third of the tiled path's, but is slower at
// m = 1 (7.9 instructions per weight: its per-unit scale loads and address arithmetic, the next
// thing to cut).
#pragma once

#include <cstdint>

#include "kernels/cuda/launch_shape.h"
#include "kernels/cuda/packed_linear_mma.cuh"
#include "kernels/cuda/packed_linear_small_m.cuh"
#include "kernels/cuda/packed_linear_stream.cuh"
#include "kernels/cuda/packed_linear_tc.cuh"

namespace tessera::cuda {

// Why packed_linear cannot run (x, m, w, y), or null when it can. Preconditions checked: m >= 1;
// w's shape accepted by PackedShapeError (k a multiple of 64, of 256 for Q4_K; n a multiple of
// 8); x, y and w.codes non-null and 16-byte aligned; w.scales non-null, w.mins for Q4_1 / Q4_K,
// w.super_scales for Q4_K. Not checked: that y [m, n] overlaps nothing and that the arrays hold
// packed_format.h's sizes.
template <typename T>
const char* PackedLinearError(const T* x, int m, const PackedLinear& w, const T* y) {
  auto aligned = [](const void* p) {
    return p != nullptr && reinterpret_cast<uintptr_t>(p) % 16 == 0;
  };
  if (m < 1) return "m must be at least 1";
  if (const char* error = PackedShapeError(w.scheme, w.n, w.k)) return error;
  if (!aligned(x) || !aligned(y) || !aligned(w.codes)) {
    return "x, y and codes must be 16-byte aligned";
  }
  if (w.scales == nullptr) return "scales missing";
  if (PackedHasMins(w.scheme) && w.mins == nullptr) return "mins missing";
  if (w.scheme == PackedScheme::kQ4_K && w.super_scales == nullptr) return "super_scales missing";
  return nullptr;
}

namespace packed_linear_detail {

// A launch every launcher rejects (an empty grid): how a precondition failure is reported.
template <class Launcher, typename T>
auto Reject(Launcher& launcher, const T* x, int m, const PackedLinear& w, T* y) {
  return launcher.Launch(LaunchShape{dim3(0), dim3(kPackedSmallMThreads), 0},
                         PackedLinearSmallMKernel<T, PackedScheme::kQ8_0, 1>, x, m, w, y);
}

}  // namespace packed_linear_detail

// The small-m path alone (packed_linear_small_m.cuh); also rejects m > kMaxM (<= 8; a smaller
// kMaxM instantiates fewer kernels).
template <class Launcher, typename T, PackedScheme kScheme, int kMaxM = kPackedSmallMMaxM>
auto LaunchPackedLinearSmallM(Launcher& launcher, const T* x, int m, const PackedLinear& w, T* y) {
  static_assert(kMaxM >= 1 && kMaxM <= kPackedSmallMMaxM);
  if (PackedLinearError(x, m, w, y) != nullptr || w.scheme != kScheme || m > kMaxM) {
    return packed_linear_detail::Reject(launcher, x, m, w, y);
  }
  const LaunchShape shape{dim3(CeilDiv(w.n, kPackedSmallMRowsPerBlock)), dim3(kPackedSmallMThreads),
                          0};
  if (m == 1) return launcher.Launch(shape, PackedLinearSmallMKernel<T, kScheme, 1>, x, m, w, y);
  if constexpr (kMaxM >= 2) {
    if (m == 2) return launcher.Launch(shape, PackedLinearSmallMKernel<T, kScheme, 2>, x, m, w, y);
  }
  if constexpr (kMaxM > 2) {
    if (m <= 4) return launcher.Launch(shape, PackedLinearSmallMKernel<T, kScheme, 4>, x, m, w, y);
    return launcher.Launch(shape, PackedLinearSmallMKernel<T, kScheme, 8>, x, m, w, y);
  }
  return packed_linear_detail::Reject(launcher, x, m, w, y);
}

namespace packed_linear_detail {

template <typename T, PackedScheme kScheme, int kM, class Launcher, class Result>
void AllowStream(Launcher& launcher, Result& result) {
  if (result.ok()) {
    result = launcher.AllowDynamicShared(PackedLinearStreamKernel<T, kScheme, kM>,
                                         kPackedStreamSharedBytes<kScheme, kM>);
  }
  if constexpr (kM < kPackedStreamMaxM) AllowStream<T, kScheme, kM == 1 ? 2 : 4>(launcher, result);
}

}  // namespace packed_linear_detail

// Lets the streaming path's kernels (every scheme and m bucket, for T) use their dynamic shared
// memory: once per T before any launch or graph capture (the worker's PreparePackedLinear). The
// launcher's result; the first refusal if any.
template <typename T, class Launcher>
auto AllowPackedLinearSharedMemory(Launcher& launcher) {
  using packed_linear_detail::AllowStream;
  auto result = launcher.AllowDynamicShared(PackedLinearStreamKernel<T, PackedScheme::kQ8_0, 1>,
                                            kPackedStreamSharedBytes<PackedScheme::kQ8_0, 1>);
  AllowStream<T, PackedScheme::kQ8_0, 2>(launcher, result);
  AllowStream<T, PackedScheme::kQ4_0, 1>(launcher, result);
  AllowStream<T, PackedScheme::kQ4_1, 1>(launcher, result);
  AllowStream<T, PackedScheme::kQ4_K, 1>(launcher, result);
  AllowStream<T, PackedScheme::kNvfp4, 1>(launcher, result);
  AllowStream<T, PackedScheme::kMxfp4, 1>(launcher, result);
  return result;
}

// Why the streaming path cannot take (m, w) over `ws`, or null (beyond PackedLinearError).
inline const char* PackedStreamError(int m, const PackedLinear& w,
                                     const PackedStreamWorkspace& ws) {
  if (m > kPackedStreamMaxM) return "the streaming path takes m <= 4";
  if (!PackedStreamTakes(w.scheme, w.k)) return "the streaming path takes k in whole stages";
  if (ws.partials == nullptr || ws.arrivals == nullptr || ws.blocks < 1) {
    return "the streaming path needs its workspace";
  }
  // Units and the loop's look-ahead (a ring's worth past the last unit) fit an int.
  if (int64_t{CeilDiv(w.n, kPackedStreamRows)} * (w.k / 64) > INT32_MAX - kPackedStreamSlots) {
    return "too many stages for the streaming path";
  }
  return nullptr;
}

// The streaming path alone (packed_linear_stream.cuh), 1 <= m <= 4, PackedStreamTakes(k), over
// `ws` (packed_stream_split.h); its shared memory allowed first (AllowPackedLinearSharedMemory;
// a kMinBlocks other than the worker's is the caller's to allow). `output` kSwiGluHalves: y is
// [m, n / 2], silu(gate)·up of W = [gate | up] (packed_stream_split.h; n is a multiple of 8).
template <class Launcher, typename T, PackedScheme kScheme,
          int kMinBlocks = kPackedStreamBlocksPerSm>
auto LaunchPackedLinearStream(Launcher& launcher, const T* x, int m, const PackedLinear& w, T* y,
                              const PackedStreamWorkspace& ws,
                              PackedStreamOutput output = PackedStreamOutput::kProduct) {
  if (PackedLinearError(x, m, w, y) != nullptr || w.scheme != kScheme ||
      PackedStreamError(m, w, ws) != nullptr) {
    return packed_linear_detail::Reject(launcher, x, m, w, y);
  }
  PackedStreamSplit split;
  split.stages = w.k / packed_stream::kStageInputs<kScheme>;
  const int tiles = PackedStreamTiles(w.n, output);
  split.units = tiles * split.stages;
  const int blocks = PackedStreamBlocks(tiles, split.stages, ws.blocks, ws.grid);
  split.warps = blocks * kPackedStreamWarps;
  auto launch = [&](auto kernel, int shared_bytes) {
    const LaunchShape shape{dim3(blocks), dim3(kPackedStreamThreads),
                            static_cast<size_t>(shared_bytes), /*dependent=*/true};
    return launcher.Launch(shape, kernel, x, m, w, y, ws, split, output);
  };
  if (m == 1) {
    return launch(PackedLinearStreamKernel<T, kScheme, 1, kMinBlocks>,
                  kPackedStreamSharedBytes<kScheme, 1>);
  }
  if (m == 2) {
    return launch(PackedLinearStreamKernel<T, kScheme, 2, kMinBlocks>,
                  kPackedStreamSharedBytes<kScheme, 2>);
  }
  return launch(PackedLinearStreamKernel<T, kScheme, 4, kMinBlocks>,
                  kPackedStreamSharedBytes<kScheme, 4>);
}

// The tensor-core decode path alone (packed_linear_tc.cuh), 1 <= m <= 16.
template <class Launcher, typename T, PackedScheme kScheme>
auto LaunchPackedLinearTc(Launcher& launcher, const T* x, int m, const PackedLinear& w, T* y) {
  if (PackedLinearError(x, m, w, y) != nullptr || w.scheme != kScheme || m > kPackedTcMaxM) {
    return packed_linear_detail::Reject(launcher, x, m, w, y);
  }
  const LaunchShape shape{dim3(CeilDiv(w.n, 8)), dim3(kPackedTcThreads), 0};
  if (m <= 8) return launcher.Launch(shape, PackedLinearTcKernel<T, kScheme, false>, x, m, w, y);
  return launcher.Launch(shape, PackedLinearTcKernel<T, kScheme, true>, x, m, w, y);
}

// The tensor-core path alone (packed_linear_mma.cuh), any m >= 1 (m / 64 < 65536).
template <class Launcher, typename T, PackedScheme kScheme>
auto LaunchPackedLinearMma(Launcher& launcher, const T* x, int m, const PackedLinear& w, T* y) {
  if (PackedLinearError(x, m, w, y) != nullptr || w.scheme != kScheme) {
    return packed_linear_detail::Reject(launcher, x, m, w, y);
  }
  const LaunchShape shape{dim3(CeilDiv(w.n, kPackedMmaTileN), CeilDiv(m, kPackedMmaTileM)),
                          dim3(kPackedMmaThreads), 0};
  return launcher.Launch(shape, PackedLinearMmaKernel<T, kScheme>, x, m, w, y);
}

// Rows up to which the dispatch takes the CUDA-core path when the streaming path does not take
// k, measured on an H200 (n = k = 4096,
// µs, small-m vs tensor-core decode; docs/perf/nvfp4.md): m = 1 Q4_0 12.1 vs 13.4, NVFP4 16.9
// vs 24.0; m = 2 13.6 vs 14.5, 18.5 vs 24.1; m = 4 15.4 vs 14.9, 20.1 vs 24.2; m = 8 30.7 vs
// 15.4, 36.5 vs 24.3.
inline constexpr int kPackedSmallMRowsFirst = 4;

// y [m, n] = x [m, k] · wᵀ through the path m picks. T: __nv_bfloat16 or __half. Preconditions:
// PackedLinearError(x, m, w, y) is null (else the launcher's invalid-configuration error), y
// overlaps nothing, w's arrays as packed_format.h describes; `ws` as the streaming path needs it
// for m <= 4 (else it is not read). Every y element is written.
template <class Launcher, typename T>
auto LaunchPackedLinear(Launcher& launcher, const T* x, int m, const PackedLinear& w, T* y,
                        const PackedStreamWorkspace& ws) {
  switch (w.scheme) {
#define TESSERA_PACKED_LINEAR_CASE(S)                                                         \
  case PackedScheme::S:                                                                       \
    return m <= kPackedStreamMaxM && PackedStreamTakes(PackedScheme::S, w.k)                  \
               ? LaunchPackedLinearStream<Launcher, T, PackedScheme::S>(launcher, x, m, w, y, \
                                                                         ws)                  \
           : m <= kPackedSmallMRowsFirst                                                      \
               ? LaunchPackedLinearSmallM<Launcher, T, PackedScheme::S,                       \
                                          kPackedSmallMRowsFirst>(launcher, x, m, w, y)       \
           : m <= kPackedTcMaxM                                                               \
               ? LaunchPackedLinearTc<Launcher, T, PackedScheme::S>(launcher, x, m, w, y)     \
               : LaunchPackedLinearMma<Launcher, T, PackedScheme::S>(launcher, x, m, w, y);
    TESSERA_PACKED_LINEAR_CASE(kQ8_0)
    TESSERA_PACKED_LINEAR_CASE(kQ4_0)
    TESSERA_PACKED_LINEAR_CASE(kQ4_1)
    TESSERA_PACKED_LINEAR_CASE(kQ4_K)
    TESSERA_PACKED_LINEAR_CASE(kNvfp4)
    TESSERA_PACKED_LINEAR_CASE(kMxfp4)
#undef TESSERA_PACKED_LINEAR_CASE
  }
  return packed_linear_detail::Reject(launcher, x, m, w, y);
}

// out [m, n / 2] = silu(x · gateᵀ) · (x · upᵀ) of w = [gate | up] in one launch (the
// streaming path's SwiGlu epilogue): the arithmetic of LaunchPackedLinear into [m, n] then
// SwiGluHalves (activations.cuh), the same bits where both split a row's k-sum alike (a block
// per tile). Preconditions: PackedLinearSwiGluTakes(m, w), as LaunchPackedLinear's streaming
// path (else the launcher's invalid-configuration error); out overlaps nothing.
template <class Launcher, typename T>
auto LaunchPackedLinearSwiGlu(Launcher& launcher, const T* x, int m, const PackedLinear& w, T* out,
                              const PackedStreamWorkspace& ws) {
  constexpr auto kSwiGlu = PackedStreamOutput::kSwiGluHalves;
  switch (w.scheme) {
#define TESSERA_PACKED_SWIGLU_CASE(S)                                                    \
  case PackedScheme::S:                                                                  \
    return LaunchPackedLinearStream<Launcher, T, PackedScheme::S>(launcher, x, m, w, out, \
                                                                  ws, kSwiGlu);
    TESSERA_PACKED_SWIGLU_CASE(kQ8_0)
    TESSERA_PACKED_SWIGLU_CASE(kQ4_0)
    TESSERA_PACKED_SWIGLU_CASE(kQ4_1)
    TESSERA_PACKED_SWIGLU_CASE(kQ4_K)
    TESSERA_PACKED_SWIGLU_CASE(kNvfp4)
    TESSERA_PACKED_SWIGLU_CASE(kMxfp4)
#undef TESSERA_PACKED_SWIGLU_CASE
  }
  return packed_linear_detail::Reject(launcher, x, m, w, out);
}

}  // namespace tessera::cuda
