// Mixture-of-experts routing on the device (Qwen3-Next / Qwen3.5-MoE softmax gating), the same
// choices, bit for bit, as kernels/cpu/moe_routing.h RouteTokens + GroupByExpert:
//
// 1. MoeRouteKernel, one warp per token (kMoeRouteTokensPerBlock tokens per block):
//    logits [n, E] f32 are replaced IN PLACE by their softmax (as RouteTokens does), then
//    expert_ids [n, k] int32 and weights [n, k] f32 get the top k in rank order.
//    - softmax mirrors SoftmaxInPlace's arithmetic on kAvx2/kAvx512 (the two are bit-identical):
//      the max; e_i = Exp(x_i - max) with the CPU's Cephes polynomial evaluated with the same
//      fused multiply-adds (RoutingExp below, no libm); the sum in 16 accumulators (accumulator
//      l adds e_l, e_{l+16}, ... in order: lanes 0..15) reduced by the CPU's fixed tree
//      ((a0+a8)+(a4+a12))+... (shuffles down by 8, 4, 2, 1); p_i = e_i * (1 / sum), the
//      reciprocal rounded once. So the probabilities are the CPU's bits.
//    - top k: k rounds of a warp arg-max over the experts that rank after the previous pick in
//      the total order "probability descending, then index ascending" (NaN below every number),
//      i.e. exactly the CPU's stable insertion order; ties go to the lower expert index.
//    - weights: w_r = p_r / Σ_r p_r, the sum in f64 over the ranks in order, one rounding to f32
//      (or p_r when normalize is off).
// 2. MoeGroupKernel, ONE block of kMoeGroupThreads (8 warps): the stable counting sort of the
//    n * k slots (slot s = t * k + r) by expert: offsets [E + 1], row_tokens [n * k], slot_rows
//    [n * k] with moe_routing.h's meaning (an expert's rows in increasing token order). Warp w
//    owns a contiguous segment of the slots; it counts its experts (shared histogram
//    [8][E]), a scan gives every (expert, warp) its first row, then each warp places its
//    segment 32 slots at a time, ranking equal experts inside the 32 by ballots in lane order.
//    It also writes the row-tile list of the grouped GEMM (moe_grouped_gemm.cuh): tile j covers
//    rows [tile_row0[j], tile_row0[j] + kMoeTileRows) of expert tile_expert[j] (clipped at the
//    expert's group end); entries past the last tile hold expert -1, up to
//    MoeMaxRowTiles(n * k, E) entries, so a launch grid sized on the host covers every step.
//
// Preconditions: 1 <= k <= E; k <= 32; E <= kMoeMaxExperts (512: the shared histogram
// [8][E] and scans, 24 KiB);
// every logits row has a finite max (as SoftmaxInPlace); n * k < 2^31. Pointers distinct.
// The grouping is one block: fine for n * k up to tens of thousands (its cost grows as
// n * k / 256 warp steps of ~32 ballots worst case, a few µs at n * k = 4096); beyond that a
// multi-block scan would be needed.
//
// Bound (H100): tiny. Routing reads n * E * 4 bytes twice (Qwen3.5: 256 experts, 1 KiB per
// token) and is latency bound (~5-10 µs for any decode batch); the grouping is one block, a few
// µs. Both are launch/latency bound, not bandwidth bound.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch_shape.h"
#include "kernels/cuda/launch_status.h"

namespace tessera::cuda {

inline constexpr int kMoeRouteTokensPerBlock = 4;  // one warp per token
inline constexpr int kMoeGroupThreads = 256;       // 8 warps, one block
inline constexpr int kMoeGroupWarps = kMoeGroupThreads / 32;
inline constexpr int kMoeMaxExperts = 512;
inline constexpr int kMoeTileRows = 8;  // grouped GEMM row tile (moe_grouped_gemm.cuh)

// Upper bound of the grouped GEMM's row tiles for `num_slots` = n * k grouped rows:
// Σ_e ceil(c_e / 8) <= floor(n k / 8) + (number of non-empty experts).
inline int MoeMaxRowTiles(int num_slots, int num_experts) {
  const int nonempty = num_slots < num_experts ? num_slots : num_experts;
  return num_slots / kMoeTileRows + nonempty;
}

// The device grouping (moe_routing.h's ExpertGroups plus the GEMM's tile list).
struct MoeGroupsView {
  int32_t* offsets = nullptr;      // [E + 1]
  int32_t* row_tokens = nullptr;   // [n * k]
  int32_t* slot_rows = nullptr;    // [n * k]
  int32_t* tile_expert = nullptr;  // [MoeMaxRowTiles], -1 past the last tile
  int32_t* tile_row0 = nullptr;    // [MoeMaxRowTiles]
};

namespace moe_detail {

// Cephes expf as kernels/cpu/simd_avx2.h Exp8 computes it (same constants, same fused
// operations, same clamps), so the softmax has the CPU's bits.
__device__ __forceinline__ float RoutingExp(float x) {
  if (x != x) return x;
  if (x < -87.33654f) return 0.0f;
  if (x > 88.0f) return INFINITY;
  const float n = rintf(__fmul_rn(x, 1.44269504088896341f));
  float r = __fmaf_rn(-n, 0.693359375f, x);
  r = __fmaf_rn(-n, -2.12194440e-4f, r);
  float p = __fmaf_rn(1.9875691500e-4f, r, 1.3981999507e-3f);
  p = __fmaf_rn(p, r, 8.3334519073e-3f);
  p = __fmaf_rn(p, r, 4.1665795894e-2f);
  p = __fmaf_rn(p, r, 1.6666665459e-1f);
  p = __fmaf_rn(p, r, 5.0000001201e-1f);
  p = __fmaf_rn(p, __fmul_rn(r, r), r);
  p = p + 1.0f;
  return __fmul_rn(p, __int_as_float((static_cast<int>(n) + 127) << 23));
}

// The routing order: (p, id) ranks before (q, other) — more probable, or equally probable (both
// NaN included) and a lower index; NaN below every number. id < 0 is "no candidate".
__device__ __forceinline__ bool RanksBefore(float p, int id, float q, int other) {
  if (other < 0) return id >= 0;
  if (id < 0) return false;
  const bool p_nan = p != p, q_nan = q != q;
  if (p_nan != q_nan) return q_nan;
  if (!p_nan && p != q) return p > q;
  return id < other;
}

// Softmax of one row in place, by one warp (header comment). Every lane returns.
__device__ __forceinline__ void WarpSoftmaxInPlace(float* row, int num_experts) {
  const int lane = threadIdx.x % 32;
  float m = -INFINITY;
  for (int e = lane; e < num_experts; e += 32) m = fmaxf(m, row[e]);
  m = WarpMax(m);
  float acc = 0.0f;  // accumulator `lane` of the CPU's 16
  if (lane < 16) {
    for (int e = lane; e < num_experts; e += 16) {
      const float value = RoutingExp(row[e] - m);
      row[e] = value;
      acc = acc + value;
    }
  }
  for (int offset = 8; offset > 0; offset >>= 1) {  // ((a0+a8)+(a4+a12))+((a2+a10)+(a6+a14))...
    acc = acc + __shfl_down_sync(0xFFFFFFFFu, acc, offset);
  }
  const float inverse = __frcp_rn(__shfl_sync(0xFFFFFFFFu, acc, 0));
  __syncwarp();  // the exps written by lanes 0..15 are read by every lane
  for (int e = lane; e < num_experts; e += 32) row[e] = __fmul_rn(row[e], inverse);
  __syncwarp();
}

// The best expert of `probs` ranking strictly after (after_p, after_id) (any expert when
// `first`); every lane gets it.
__device__ __forceinline__ void WarpNextExpert(const float* probs, int num_experts, bool first,
                                               float after_p, int after_id, float* best_p,
                                               int* best_id) {
  const int lane = threadIdx.x % 32;
  float p = 0.0f;
  int id = -1;
  for (int e = lane; e < num_experts; e += 32) {
    const float q = probs[e];
    if ((first || RanksBefore(after_p, after_id, q, e)) && RanksBefore(q, e, p, id)) {
      p = q;
      id = e;
    }
  }
  for (int offset = 16; offset > 0; offset >>= 1) {  // a total order: any tree gives the max
    const float other_p = __shfl_xor_sync(0xFFFFFFFFu, p, offset);
    const int other_id = __shfl_xor_sync(0xFFFFFFFFu, id, offset);
    if (RanksBefore(other_p, other_id, p, id)) {
      p = other_p;
      id = other_id;
    }
  }
  *best_p = p;
  *best_id = id;
}

}  // namespace moe_detail

// Logit: float (a template so the header defines no non-inline function).
template <typename Logit>
__global__ void __launch_bounds__(32 * kMoeRouteTokensPerBlock)
    MoeRouteKernel(Logit* __restrict__ logits, int num_tokens, int num_experts, int k,
                   bool normalize, int32_t* __restrict__ expert_ids,
                   float* __restrict__ weights) {
  const int token = blockIdx.x * kMoeRouteTokensPerBlock + threadIdx.x / 32;
  if (token >= num_tokens) return;  // warp-uniform
  const int lane = threadIdx.x % 32;
  Logit* row = logits + int64_t{token} * num_experts;
  moe_detail::WarpSoftmaxInPlace(row, num_experts);
  // Round r: the rank-r expert; lane r keeps it.
  float pick_p = 0.0f, my_p = 0.0f;
  int pick_id = -1, my_id = 0;
  double sum = 0.0;
  for (int r = 0; r < k; ++r) {
    float next_p;
    int next_id;
    moe_detail::WarpNextExpert(row, num_experts, r == 0, pick_p, pick_id, &next_p, &next_id);
    pick_p = next_p;
    pick_id = next_id;
    sum += static_cast<double>(pick_p);
    if (lane == r) {
      my_p = pick_p;
      my_id = pick_id;
    }
  }
  if (lane < k) {
    const int64_t slot = int64_t{token} * k + lane;
    expert_ids[slot] = my_id;
    weights[slot] = normalize ? static_cast<float>(static_cast<double>(my_p) / sum) : my_p;
  }
}

namespace moe_detail {

// Exclusive prefix sums of counts[0, n) into out[0, n] (out[n] = total), by warp 0.
__device__ __forceinline__ void WarpExclusiveScan(const int32_t* counts, int n, int32_t* out) {
  const int lane = threadIdx.x % 32;
  const int per_lane = (n + 31) / 32;
  const int begin = lane * per_lane < n ? lane * per_lane : n;
  const int end = begin + per_lane < n ? begin + per_lane : n;
  int32_t mine = 0;
  for (int i = begin; i < end; ++i) mine += counts[i];
  int32_t inclusive = mine;
  for (int offset = 1; offset < 32; offset <<= 1) {
    const int32_t up = __shfl_up_sync(0xFFFFFFFFu, inclusive, offset);
    if (lane >= offset) inclusive += up;
  }
  int32_t running = inclusive - mine;
  for (int i = begin; i < end; ++i) {
    out[i] = running;
    running += counts[i];
  }
  if (lane == 31) out[n] = inclusive;
}

// The lanes of this warp whose `id` equals mine (among lanes with valid set); 0 when !valid.
__device__ __forceinline__ unsigned WarpPeers(int id, bool valid) {
  unsigned unresolved = __ballot_sync(0xFFFFFFFFu, valid);
  unsigned peers = 0;
  while (unresolved != 0) {  // warp-uniform
    const int leader = __ffs(unresolved) - 1;
    const int leader_id = __shfl_sync(0xFFFFFFFFu, id, leader);
    const unsigned group = __ballot_sync(0xFFFFFFFFu, valid && id == leader_id);
    if (valid && id == leader_id) peers = group;
    unresolved &= ~group;
  }
  return peers;
}

}  // namespace moe_detail

namespace moe_detail {

// Step 3 of the grouping: per expert, each warp's count becomes the warp's first row within the
// expert's group (exclusive over warps); totals[e] and tiles[e] = ceil(totals[e] / kMoeTileRows).
__device__ __forceinline__ void WarpStartsPerExpert(int32_t* cursor, int num_experts,
                                                    int32_t* totals, int32_t* tiles) {
  for (int e = threadIdx.x; e < num_experts; e += blockDim.x) {
    int32_t running = 0;
    for (int w = 0; w < kMoeGroupWarps; ++w) {
      const int32_t count = cursor[w * num_experts + e];
      cursor[w * num_experts + e] = running;
      running += count;
    }
    totals[e] = running;
    tiles[e] = (running + kMoeTileRows - 1) / kMoeTileRows;
  }
}

// Step 5: offsets and the tile list to global memory; cursors made absolute rows.
__device__ __forceinline__ void WriteOffsetsAndTiles(const int32_t* offsets, const int32_t* tiles,
                                                     const int32_t* tile_start, int num_experts,
                                                     int max_tiles, int32_t* cursor,
                                                     MoeGroupsView groups) {
  for (int e = threadIdx.x; e <= num_experts; e += blockDim.x) groups.offsets[e] = offsets[e];
  for (int i = threadIdx.x; i < kMoeGroupWarps * num_experts; i += blockDim.x) {
    cursor[i] += offsets[i % num_experts];
  }
  for (int e = threadIdx.x; e < num_experts; e += blockDim.x) {
    for (int j = 0; j < tiles[e]; ++j) {
      groups.tile_expert[tile_start[e] + j] = e;
      groups.tile_row0[tile_start[e] + j] = offsets[e] + j * kMoeTileRows;
    }
  }
  for (int t = tile_start[num_experts] + threadIdx.x; t < max_tiles; t += blockDim.x) {
    groups.tile_expert[t] = -1;
    groups.tile_row0[t] = 0;
  }
}

// Step 6: warp w places the slots [begin, end) in order, 32 at a time.
__device__ __forceinline__ void PlaceSegment(const int32_t* expert_ids, int begin, int end, int k,
                                             int32_t* warp_cursor, MoeGroupsView groups) {
  const int lane = threadIdx.x % 32;
  for (int base = begin; base < end; base += 32) {  // warp-uniform
    const int slot = base + lane;
    const bool valid = slot < end;
    const int id = valid ? expert_ids[slot] : -1;
    const unsigned peers = WarpPeers(id, valid);
    const int row = valid ? warp_cursor[id] + __popc(peers & ((1u << lane) - 1u)) : 0;
    __syncwarp();  // every peer read the cursor before the last one advances it
    if (valid && lane == 31 - __clz(peers)) warp_cursor[id] += __popc(peers);
    __syncwarp();
    if (valid) {
      groups.row_tokens[row] = slot / k;
      groups.slot_rows[slot] = row;
    }
  }
}

}  // namespace moe_detail

// One block of kMoeGroupThreads (header comment, step 2). Index: int32_t.
template <typename Index>
__global__ void __launch_bounds__(kMoeGroupThreads)
    MoeGroupKernel(const Index* __restrict__ expert_ids, int num_slots, int k, int num_experts,
                   int max_tiles, MoeGroupsView groups) {
  TESSERA_SHARED(int32_t, cursor, kMoeGroupWarps * kMoeMaxExperts);  // [warp][expert]
  TESSERA_SHARED(int32_t, totals, kMoeMaxExperts + 1);
  TESSERA_SHARED(int32_t, offsets, kMoeMaxExperts + 1);
  TESSERA_SHARED(int32_t, tiles, kMoeMaxExperts + 1);
  TESSERA_SHARED(int32_t, tile_start, kMoeMaxExperts + 1);
  const int warp = threadIdx.x / 32;
  const int per_warp = (num_slots + kMoeGroupWarps - 1) / kMoeGroupWarps;
  const int begin = warp * per_warp < num_slots ? warp * per_warp : num_slots;
  const int end = begin + per_warp < num_slots ? begin + per_warp : num_slots;
  for (int i = threadIdx.x; i < kMoeGroupWarps * num_experts; i += blockDim.x) cursor[i] = 0;
  __syncthreads();
  for (int s = begin + threadIdx.x % 32; s < end; s += 32) {
    atomicAdd(&cursor[warp * num_experts + expert_ids[s]], 1);
  }
  __syncthreads();
  moe_detail::WarpStartsPerExpert(cursor, num_experts, totals, tiles);
  __syncthreads();
  if (warp == 0) moe_detail::WarpExclusiveScan(totals, num_experts, offsets);
  if (warp == 1) moe_detail::WarpExclusiveScan(tiles, num_experts, tile_start);
  __syncthreads();
  moe_detail::WriteOffsetsAndTiles(offsets, tiles, tile_start, num_experts, max_tiles, cursor,
                                   groups);
  __syncthreads();
  moe_detail::PlaceSegment(expert_ids, begin, end, k, cursor + warp * num_experts, groups);
}

// Routing only: logits [n, E] (softmaxed in place) -> expert_ids, weights [n, k].
// Preconditions: header comment; n >= 0.
template <class Launcher>
auto LaunchMoeRoute(Launcher& launcher, float* logits, int num_tokens, int num_experts, int k,
                    bool normalize, int32_t* expert_ids, float* weights) {
  const int blocks = int(CeilDiv(num_tokens > 0 ? num_tokens : 1, kMoeRouteTokensPerBlock));
  const LaunchShape shape{dim3(blocks), dim3(32 * kMoeRouteTokensPerBlock), 0};
  return launcher.Launch(shape, MoeRouteKernel<float>, logits, num_tokens, num_experts, k,
                         normalize, expert_ids, weights);
}

// Grouping only: expert_ids [n, k] (each in [0, E)) -> groups (every array sized as
// MoeGroupsView says, tile arrays MoeMaxRowTiles(n * k, E) entries).
template <class Launcher>
auto LaunchMoeGroupByExpert(Launcher& launcher, const int32_t* expert_ids, int num_tokens, int k,
                            int num_experts, const MoeGroupsView& groups) {
  const int num_slots = num_tokens * k;
  const LaunchShape shape{dim3(1), dim3(kMoeGroupThreads), 0};
  return launcher.Launch(shape, MoeGroupKernel<int32_t>, expert_ids, num_slots, k, num_experts,
                         MoeMaxRowTiles(num_slots, num_experts), groups);
}

// Both, in order (two launches; returns the first failure).
template <class Launcher>
auto LaunchMoeRouting(Launcher& launcher, float* logits, int num_tokens, int num_experts, int k,
                      bool normalize, int32_t* expert_ids, float* weights,
                      const MoeGroupsView& groups) {
  auto status = LaunchMoeRoute(launcher, logits, num_tokens, num_experts, k, normalize,
                               expert_ids, weights);
  if (!LaunchSucceeded(status)) return status;
  return LaunchMoeGroupByExpert(launcher, expert_ids, num_tokens, k, num_experts, groups);
}

}  // namespace tessera::cuda
