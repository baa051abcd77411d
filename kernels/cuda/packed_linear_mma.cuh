// The tensor-core path of packed_linear.cuh: Y[m, n] = Σ_k X[m, k]·W[n, k] with mma.sync
// m16n8k16 (bf16 or f16 as T, f32 accumulation), for m > 8 (design and bound in
// packed_linear.cuh).
//
// A block of 4 warps computes a 64 x 64 tile of Y (warp (wm, wn): rows 32 wm.., columns
// 32 wn.., 2 x 4 mma tiles), walking k in tiles of 64 with two shared-memory stages filled by
// 16-byte cp.async: the X tile as T (rows padded to 144 bytes, so ldmatrix's 8 row reads hit
// distinct banks) and the codes tile as bytes (rows padded to 48 / 80 bytes, conflict-free
// byte reads). Rows past m or n are clamped to the last row (computed, never stored).
// Per group of G inputs (one or two k16 steps): A fragments by ldmatrix.x4; B fragments from
// the code bytes, each code its integer value c (packed_decode.cuh) as T (exact), so the mma
// adds exact products in f32 into a zeroed fragment; then acc += fragment·scale of each column
// in f32 (+ min·Σ x of the row's group for Q4_1 / Q4_K, summed from the X tile in shared memory).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/packed_decode.cuh"
#include "kernels/cuda/ptx_ops.cuh"

namespace tessera::cuda {

inline constexpr int kPackedMmaThreads = 128;
inline constexpr int kPackedMmaTileM = 64;
inline constexpr int kPackedMmaTileN = 64;
inline constexpr int kPackedMmaTileK = 64;

namespace packed_mma {

inline constexpr int kAStride = kPackedMmaTileK + 8;  // T per X-tile row (144 bytes)
template <PackedScheme kScheme>
inline constexpr int kRowBytes = kPackedMmaTileK * PackedCodeBits(kScheme) / 8;  // 32 or 64
template <PackedScheme kScheme>
inline constexpr int kBStride = kRowBytes<kScheme> + 16;  // bytes per codes-tile row
inline constexpr int kGroupsPerTile = 2;                  // 32-input groups (the X group sums)

template <typename T>
inline constexpr ptx::MmaType kMmaType =
    std::is_same_v<T, __half> ? ptx::MmaType::kF16 : ptx::MmaType::kBf16;

// Issues the cp.async copies of the X tile [m0, +64) x [k0, +64) and the codes tile
// [n0, +64) x [k0, +64) into one stage.
template <typename T, PackedScheme kScheme>
__device__ __forceinline__ void LoadTiles(const T* x, int m, const PackedLinear& w, int m0,
                                          int n0, int k0, T* a_tile, uint8_t* b_tile) {
  for (int i = threadIdx.x; i < kPackedMmaTileM * 8; i += kPackedMmaThreads) {
    const int r = i / 8, c = i % 8;
    const int row = m0 + r < m ? m0 + r : m - 1;
    ptx::CpAsync16(a_tile + r * kAStride + 8 * c, x + int64_t{row} * w.k + k0 + 8 * c);
  }
  constexpr int kChunks = kRowBytes<kScheme> / 16;
  const int64_t row_bytes = PackedRowCodeBytes(kScheme, w.k);
  for (int i = threadIdx.x; i < kPackedMmaTileN * kChunks; i += kPackedMmaThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const int row = n0 + r < w.n ? n0 + r : w.n - 1;
    ptx::CpAsync16(b_tile + r * kBStride<kScheme> + 16 * c,
                   w.codes + row * row_bytes + int64_t{k0} * PackedCodeBits(kScheme) / 8 + 16 * c);
  }
}

// sums[r][g] = Σ of X-tile row r's inputs [32 g, 32 g + 32): one thread per (row, group).
template <typename T>
__device__ __forceinline__ void GroupSums(const T* a_tile, float* sums) {
  static_assert(kPackedMmaThreads == kPackedMmaTileM * kGroupsPerTile);
  const int r = threadIdx.x / kGroupsPerTile, g = threadIdx.x % kGroupsPerTile;
  float sum = 0.0f;
  for (int kk = 0; kk < 32; ++kk) sum += ToFloat(a_tile[r * kAStride + 32 * g + kk]);
  sums[threadIdx.x] = sum;
}

// The B fragment of a k16 step at tile input kk for the lane's column (its codes-tile row `row`):
// inputs kk + 2t, +1 (reg 0) and kk + 2t + 8, +9 (reg 1), t = lane % 4.
template <typename T, PackedScheme kScheme>
__device__ __forceinline__ void BFragment(const uint8_t* row, int kk, int t, uint32_t b[2]) {
  using packed_detail::CodeValue;
  TESSERA_UNROLL
  for (int reg = 0; reg < 2; ++reg) {
    const int input = kk + 2 * t + 8 * reg;
    unsigned low, high;
    if constexpr (PackedCodeBits(kScheme) == 8) {
      low = row[input], high = row[input + 1];
    } else {
      const unsigned byte = row[input / 2];
      low = byte & 15u, high = byte >> 4;
    }
    b[reg] = packed_detail::PackPair<T>(CodeValue<kScheme>(low), CodeValue<kScheme>(high));
  }
}

// acc += part·scale (+ min·group sum) for the group `group` of the warp's 2 x 4 mma tiles.
template <PackedScheme kScheme>
__device__ __forceinline__ void ApplyGroup(const PackedLinear& w, int col0, int group,
                                           const float* sums, int group_in_tile, int row0,
                                           const float (&part)[2][4][4], float (&acc)[2][4][4]) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  TESSERA_UNROLL
  for (int j = 0; j < 4; ++j) {
    packed_detail::GroupScale scale[2];
    TESSERA_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int col = col0 + 8 * j + 2 * t + h;
      scale[h] = packed_detail::LoadGroupScale<kScheme>(w, col < w.n ? col : w.n - 1, group);
    }
    TESSERA_UNROLL
    for (int i = 0; i < 2; ++i) {
      TESSERA_UNROLL
      for (int e = 0; e < 4; ++e) {
        acc[i][j][e] = __fmaf_rn(part[i][j][e], scale[e & 1].scale, acc[i][j][e]);
        if constexpr (PackedHasMins(kScheme)) {
          const int r = row0 + 16 * i + g + 8 * (e >> 1);
          acc[i][j][e] = __fmaf_rn(scale[e & 1].min, sums[r * kGroupsPerTile + group_in_tile],
                                   acc[i][j][e]);
        }
      }
    }
  }
}

// One 64-input k tile of the warp's 32 x 32 outputs (tile stage a_tile / b_tile, at input k0).
template <typename T, PackedScheme kScheme>
__device__ __forceinline__ void ComputeTile(const T* a_tile, const uint8_t* b_tile,
                                            const float* sums, const PackedLinear& w, int k0,
                                            int col0, float (&acc)[2][4][4]) {
  constexpr int kG = PackedGroupSize(kScheme);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int row0 = 32 * (warp / 2), wcol = 32 * (warp % 2);
  TESSERA_UNROLL
  for (int gi = 0; gi < kPackedMmaTileK / kG; ++gi) {
    float part[2][4][4] = {};
    TESSERA_UNROLL
    for (int kk = gi * kG; kk < (gi + 1) * kG; kk += 16) {
      uint32_t a[2][4];
      TESSERA_UNROLL
      for (int i = 0; i < 2; ++i) {
        ptx::LdMatrix<4>(a[i], a_tile + (row0 + 16 * i + lane % 16) * kAStride + kk + 8 * (lane / 16));
      }
      TESSERA_UNROLL
      for (int j = 0; j < 4; ++j) {
        uint32_t b[2];
        BFragment<T, kScheme>(b_tile + (wcol + 8 * j + lane / 4) * kBStride<kScheme>, kk, lane % 4, b);
        TESSERA_UNROLL
        for (int i = 0; i < 2; ++i) ptx::MmaM16N8K16<kMmaType<T>>(part[i][j], a[i], b, part[i][j]);
      }
    }
    ApplyGroup<kScheme>(w, col0 + wcol, (k0 + gi * kG) / kG, sums, gi * kG / 32, row0, part, acc);
  }
}

// Y rows m0 + .., columns col0 + .. of the warp's tiles (times NVFP4's tensor scale), as pairs.
template <typename T, PackedScheme kScheme>
__device__ __forceinline__ void StoreTile(const float (&acc)[2][4][4], const PackedLinear& w,
                                          int m, int m0, int col0, T* y) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float scale = kScheme == PackedScheme::kNvfp4 ? w.tensor_scale : 1.0f;
  TESSERA_UNROLL
  for (int i = 0; i < 2; ++i) {
    TESSERA_UNROLL
    for (int j = 0; j < 4; ++j) {
      const int col = col0 + 32 * (warp % 2) + 8 * j + 2 * (lane % 4);
      TESSERA_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + 32 * (warp / 2) + 16 * i + lane / 4 + 8 * h;
        if (row >= m || col >= w.n) continue;
        *reinterpret_cast<uint32_t*>(y + int64_t{row} * w.n + col) = packed_detail::PackPair<T>(
            acc[i][j][2 * h] * scale, acc[i][j][2 * h + 1] * scale);
      }
    }
  }
}

}  // namespace packed_mma

// Grid (ceil(n / 64), ceil(m / 64)), kPackedMmaThreads threads.
template <typename T, PackedScheme kScheme>
__global__ void __launch_bounds__(kPackedMmaThreads)
    PackedLinearMmaKernel(const T* __restrict__ x, int m, PackedLinear w, T* __restrict__ y) {
  using namespace packed_mma;
  constexpr int kBBytes = 2 * kPackedMmaTileN * kBStride<kScheme>;
  TESSERA_SHARED(T, a_tiles, 2 * kPackedMmaTileM * kAStride);
  TESSERA_SHARED(uint8_t, b_tiles, kBBytes);
  TESSERA_SHARED(float, sums, PackedHasMins(kScheme) ? kPackedMmaTileM * kGroupsPerTile : 1);
  const int m0 = blockIdx.y * kPackedMmaTileM, n0 = blockIdx.x * kPackedMmaTileN;
  const int tiles = w.k / kPackedMmaTileK;
  float acc[2][4][4] = {};
  LoadTiles<T, kScheme>(x, m, w, m0, n0, 0, a_tiles, b_tiles);
  ptx::CpAsyncCommit();
  for (int kt = 0; kt < tiles; ++kt) {
    const int stage = kt % 2;
    if (kt + 1 < tiles) {  // the other stage was released by the last iteration's barrier
      LoadTiles<T, kScheme>(x, m, w, m0, n0, (kt + 1) * kPackedMmaTileK,
                            a_tiles + (1 - stage) * kPackedMmaTileM * kAStride,
                            b_tiles + (1 - stage) * kPackedMmaTileN * kBStride<kScheme>);
    }
    ptx::CpAsyncCommit();
    ptx::CpAsyncWait<1>();  // this thread's copies of tile kt have landed
    __syncthreads();        // and everyone's
    const T* a_tile = a_tiles + stage * kPackedMmaTileM * kAStride;
    if constexpr (PackedHasMins(kScheme)) {
      GroupSums(a_tile, sums);
      __syncthreads();
    }
    ComputeTile<T, kScheme>(a_tile, b_tiles + stage * kPackedMmaTileN * kBStride<kScheme>, sums, w,
                            kt * kPackedMmaTileK, n0, acc);
    __syncthreads();  // the stage (and sums) may be overwritten after this
  }
  StoreTile<T, kScheme>(acc, w, m, m0, n0, y);
}

}  // namespace tessera::cuda
