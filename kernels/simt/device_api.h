// CUDA's device-side names for g++: what a kernel .cuh sees when it is compiled for the SIMT
// emulator instead of by nvcc. Include it only through kernels/cuda/device_compat.cuh.
//
// Host equivalents of the fast-math intrinsics (documented difference from the GPU):
//   __expf/__logf/__sinf/__cosf/__powf  -> the correctly rounded libm function (the GPU's are
//                                           approximate: ~2 ulp, more for large arguments)
//   rsqrtf(x) -> 1/sqrtf(x);  __fdividef(a,b) -> a/b;  __frcp_rn(x) -> 1/x
//   __fmul_rn(a,b) -> a*b (exact equivalent: both are the correctly rounded product)
// nvcc also contracts a*b+c into fma by default; emulated code is built with -ffp-contract=off,
// so tests compare emulated and reference results with stated tolerances.
#pragma once

// CUDA's own number formats first (host conversions under g++), then our definitions of the
// qualifiers they would otherwise turn into unknown attributes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <source_location>
#include <string>
#include <type_traits>

#include "kernels/simt/thread_context.h"

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __noinline__
#undef __constant__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __constant__
#define __launch_bounds__(...)

#define threadIdx (::tessera::simt::current_coordinates.thread_idx)
#define blockIdx (::tessera::simt::current_coordinates.block_idx)
#define blockDim (::tessera::simt::current_coordinates.block_dim)
#define gridDim (::tessera::simt::current_coordinates.grid_dim)
inline constexpr int warpSize = 32;

// ---- barriers and warp collectives -------------------------------------------------------
inline void __syncthreads(std::source_location where = std::source_location::current()) {
  ::tessera::simt::detail::BlockBarrier(where);
}

inline void __syncwarp(unsigned mask = 0xFFFFFFFFu,
                       std::source_location where = std::source_location::current()) {
  using namespace ::tessera::simt::detail;
  WarpDepart(WarpArrive(mask, CollectiveKind::kSyncWarp, nullptr, 0, where));
}

namespace tessera::simt::detail {

// Reads `source`'s value from a completed shuffle group; reading a lane outside the mask is a
// kernel bug (undefined on the GPU).
template <typename T>
T ShuffleRead(const WarpGroupView& view, int source, T own) {
  if (source == view.self_lane) return own;
  if (!(view.mask & (1u << source))) {
    Fail("__shfl_sync reads lane " + std::to_string(source) + ", which its mask does not name");
  }
  T value;
  std::memcpy(&value, &view.lanes[source], sizeof(T));
  return value;
}

// One shuffle: every lane contributes `value`; `source_of(lane)` gives the lane to read, or -1
// for "keep my own value".
template <typename T, typename SourceOf>
T Shuffle(unsigned mask, T value, int width, std::source_location where, SourceOf source_of) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= kLanePayloadBytes);
  if (width <= 0 || width > 32 || (width & (width - 1)) != 0) {
    Fail("__shfl_*_sync width must be a power of two in 1..32");
  }
  const WarpGroupView view = WarpArrive(mask, CollectiveKind::kShuffle, &value, sizeof(T), where);
  const int source = source_of(view.self_lane);
  const T result = source < 0 ? value : ShuffleRead(view, source, value);
  WarpDepart(view);
  return result;
}

inline WarpGroupView Vote(unsigned mask, CollectiveKind kind, int predicate,
                          std::source_location where) {
  const int flag = predicate != 0;
  return WarpArrive(mask, kind, &flag, sizeof(flag), where);
}

inline unsigned BallotOf(const WarpGroupView& view) {
  unsigned ballot = 0;
  for (unsigned m = view.mask; m; m &= m - 1) {
    const int lane = std::countr_zero(m);
    int flag;
    std::memcpy(&flag, &view.lanes[lane], sizeof(flag));
    if (flag) ballot |= 1u << lane;
  }
  return ballot;
}

}  // namespace tessera::simt::detail

template <typename T>
T __shfl_sync(unsigned mask, T value, int src_lane, int width = 32,
              std::source_location where = std::source_location::current()) {
  return ::tessera::simt::detail::Shuffle(mask, value, width, where, [&](int lane) {
    return (lane & ~(width - 1)) + (src_lane & (width - 1));
  });
}

template <typename T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32,
                  std::source_location where = std::source_location::current()) {
  return ::tessera::simt::detail::Shuffle(mask, value, width, where, [&](int lane) {
    const int source = lane ^ lane_mask;
    return source >= (lane & ~(width - 1)) + width ? -1 : source;
  });
}

template <typename T>
T __shfl_up_sync(unsigned mask, T value, unsigned delta, int width = 32,
                 std::source_location where = std::source_location::current()) {
  return ::tessera::simt::detail::Shuffle(mask, value, width, where, [&](int lane) {
    return (lane & (width - 1)) < static_cast<int>(delta) ? -1 : lane - static_cast<int>(delta);
  });
}

template <typename T>
T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = 32,
                   std::source_location where = std::source_location::current()) {
  return ::tessera::simt::detail::Shuffle(mask, value, width, where, [&](int lane) {
    return (lane & (width - 1)) + static_cast<int>(delta) >= width ? -1
                                                                   : lane + static_cast<int>(delta);
  });
}

inline unsigned __ballot_sync(unsigned mask, int predicate,
                              std::source_location where = std::source_location::current()) {
  using namespace ::tessera::simt::detail;
  const WarpGroupView view = Vote(mask, CollectiveKind::kBallot, predicate, where);
  const unsigned ballot = BallotOf(view);
  WarpDepart(view);
  return ballot;
}

inline int __any_sync(unsigned mask, int predicate,
                      std::source_location where = std::source_location::current()) {
  using namespace ::tessera::simt::detail;
  const WarpGroupView view = Vote(mask, CollectiveKind::kAny, predicate, where);
  const int any = BallotOf(view) != 0;
  WarpDepart(view);
  return any;
}

inline int __all_sync(unsigned mask, int predicate,
                      std::source_location where = std::source_location::current()) {
  using namespace ::tessera::simt::detail;
  const WarpGroupView view = Vote(mask, CollectiveKind::kAll, predicate, where);
  const int all = BallotOf(view) == view.mask;
  WarpDepart(view);
  return all;
}

// ---- atomics: an emulated thread is never interrupted between synchronisation points, so a
// read-modify-write is atomic with respect to every other emulated thread.
template <typename T>
T atomicAdd(T* address, T value) {
  const T old = *address;
  *address = old + value;
  return old;
}
template <typename T>
T atomicMax(T* address, T value) {
  const T old = *address;
  *address = old < value ? value : old;
  return old;
}
template <typename T>
T atomicMin(T* address, T value) {
  const T old = *address;
  *address = value < old ? value : old;
  return old;
}
template <typename T>
T atomicExch(T* address, T value) {
  const T old = *address;
  *address = value;
  return old;
}
template <typename T>
T atomicCAS(T* address, T compare, T value) {
  const T old = *address;
  if (old == compare) *address = value;
  return old;
}

// ---- loads, fences, bit and float intrinsics ----------------------------------------------
template <typename T>
T __ldg(const T* address) {
  return *address;
}
template <typename T>
T __ldcg(const T* address) {
  return *address;
}
inline void __threadfence() {}
inline void __threadfence_block() {}

inline int __float_as_int(float x) { return std::bit_cast<int>(x); }
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
inline int __popc(unsigned x) { return std::popcount(x); }
inline int __popcll(unsigned long long x) { return std::popcount(x); }
inline int __clz(unsigned x) { return std::countl_zero(x); }
inline int __ffs(unsigned x) { return x == 0 ? 0 : std::countr_zero(x) + 1; }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}

inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
// A product nvcc never contracts into an fma (kernels use it to match an -ffp-contract=off CPU
// reference bit for bit); on the host a plain product, which -ffp-contract=off keeps separate.
inline float __fmul_rn(float a, float b) { return a * b; }
// glibc declares __expf & co. with C linkage, so these are macros rather than overloads.
#define __expf(x) (::expf(x))
#define __logf(x) (::logf(x))
#define __sinf(x) (::sinf(x))
#define __cosf(x) (::cosf(x))
#define __powf(x, y) (::powf((x), (y)))
