// The tensor-core path of packed_linear.cuh: Y[m, n] = Σ_k X[m, k]·W[n, k] with mma.sync
// m16n8k16 (bf16 or f16 as T, f32 accumulation), for m > 8 (design and bound in
// packed_linear.cuh).
//
// A block of 4 warps computes a 64 x 64 tile of Y (warp (wm, wn): rows 32 wm.., columns
// 32 wn.., 2 x 4 mma tiles), walking k in tiles of 64 through three shared-memory stages, two
// tiles loading while one is computed: the X tile as T (rows padded to 144 bytes, so ldmatrix's
// 8 row reads hit distinct banks) and the codes tile as bytes (rows padded to 48 / 80 bytes,
// conflict-free byte reads), both by 16-byte cp.async, and the tile's group scales, loaded into
// registers two tiles ahead and stored decoded (f32 scale, min) into the stage after this
// tile's mma. Rows past m or n are clamped to the last row (computed, never stored).
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
inline constexpr int kStages = 3;
// Scale groups of one row in a k tile, floats per group in the scale stage (scale [, min]),
// floats per stage and raw scales each thread loads per tile.
template <PackedScheme kScheme>
inline constexpr int kTileGroups = kPackedMmaTileK / PackedGroupSize(kScheme);
template <PackedScheme kScheme>
inline constexpr int kScaleFields = PackedHasMins(kScheme) ? 2 : 1;
template <PackedScheme kScheme>
inline constexpr int kScaleFloats = kPackedMmaTileN * kTileGroups<kScheme> * kScaleFields<kScheme>;
template <PackedScheme kScheme>
inline constexpr int kScalesPerThread = kPackedMmaTileN * kTileGroups<kScheme> / kPackedMmaThreads;

template <typename T>
inline constexpr ptx::MmaType kMmaType =
    std::is_same_v<T, __half> ? ptx::MmaType::kF16 : ptx::MmaType::kBf16;

// Issues the cp.async copies of the X tile [m0, +64) x [k0, +64) and the codes tile
// [n0, +64) x [k0, +64) into one stage.
template <typename T, PackedScheme kScheme>
__device__ __forceinline__ void LoadTiles(const T* x, int m, const PackedLinear& w, int m0, int n0,
                                          int k0, T* a_tile, uint8_t* b_tile) {
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

// This thread's share of the raw scales of the codes tile [n0, +64) x [k0, +64).
template <PackedScheme kScheme>
__device__ __forceinline__ void LoadTileScales(
    const PackedLinear& w, int n0, int k0,
    packed_detail::RawGroupScale (&raw)[kScalesPerThread<kScheme>]) {
  TESSERA_UNROLL
  for (int i = 0; i < kScalesPerThread<kScheme>; ++i) {
    const int entry = threadIdx.x + i * kPackedMmaThreads;
    const int r = entry / kTileGroups<kScheme>, group = entry % kTileGroups<kScheme>;
    raw[i] = packed_detail::LoadRawGroupScale<kScheme>(w, n0 + r < w.n ? n0 + r : w.n - 1,
                                                       k0 / PackedGroupSize(kScheme) + group);
  }
}

// scales[(r · groups + group) · fields] = the decoded scale (and min) of LoadTileScales' entries.
template <PackedScheme kScheme>
__device__ __forceinline__ void StoreTileScales(
    const packed_detail::RawGroupScale (&raw)[kScalesPerThread<kScheme>], float* scales) {
  TESSERA_UNROLL
  for (int i = 0; i < kScalesPerThread<kScheme>; ++i) {
    const int entry = threadIdx.x + i * kPackedMmaThreads;
    const packed_detail::GroupScale s = packed_detail::DecodeGroupScale<kScheme>(raw[i]);
    scales[entry * kScaleFields<kScheme>] = s.scale;
    if constexpr (PackedHasMins(kScheme)) scales[entry * kScaleFields<kScheme> + 1] = s.min;
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

// acc += part·scale (+ min·group sum) for the tile's group `group` of the warp's 2 x 4 mma tiles
// (scales: the stage's decoded scales; wcol, row0: the warp's first tile column and row).
template <PackedScheme kScheme>
__device__ __forceinline__ void ApplyGroup(const float* scales, const float* sums, int group,
                                           int wcol, int row0, const float (&part)[2][4][4],
                                           float (&acc)[2][4][4]) {
  constexpr int kFields = kScaleFields<kScheme>;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  TESSERA_UNROLL
  for (int j = 0; j < 4; ++j) {
    packed_detail::GroupScale scale[2];
    TESSERA_UNROLL
    for (int h = 0; h < 2; ++h) {
      const float* entry =
          scales + ((wcol + 8 * j + 2 * t + h) * kTileGroups<kScheme> + group) * kFields;
      scale[h] = {entry[0], kFields == 2 ? entry[kFields - 1] : 0.0f};
    }
    TESSERA_UNROLL
    for (int i = 0; i < 2; ++i) {
      TESSERA_UNROLL
      for (int e = 0; e < 4; ++e) {
        acc[i][j][e] = __fmaf_rn(part[i][j][e], scale[e & 1].scale, acc[i][j][e]);
        if constexpr (PackedHasMins(kScheme)) {  // G = 32: the tile's group is the sums' group
          const int r = row0 + 16 * i + g + 8 * (e >> 1);
          acc[i][j][e] =
              __fmaf_rn(scale[e & 1].min, sums[r * kGroupsPerTile + group], acc[i][j][e]);
        }
      }
    }
  }
}

// One 64-input k tile of the warp's 32 x 32 outputs (one stage's X, codes and scales).
template <typename T, PackedScheme kScheme>
__device__ __forceinline__ void ComputeTile(const T* a_tile, const uint8_t* b_tile,
                                            const float* scales, const float* sums,
                                            float (&acc)[2][4][4]) {
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
        ptx::LdMatrix<4>(a[i],
                         a_tile + (row0 + 16 * i + lane % 16) * kAStride + kk + 8 * (lane / 16));
      }
      TESSERA_UNROLL
      for (int j = 0; j < 4; ++j) {
        uint32_t b[2];
        BFragment<T, kScheme>(b_tile + (wcol + 8 * j + lane / 4) * kBStride<kScheme>, kk, lane % 4,
                              b);
        TESSERA_UNROLL
        for (int i = 0; i < 2; ++i) ptx::MmaM16N8K16<kMmaType<T>>(part[i][j], a[i], b, part[i][j]);
      }
    }
    ApplyGroup<kScheme>(scales, sums, gi, wcol, row0, part, acc);
  }
}

// Y rows m0 + .., columns col0 + .. of the warp's tiles (times NVFP4's tensor scale), as pairs.
template <typename T, PackedScheme kScheme>
__device__ __forceinline__ void StoreTile(const float (&acc)[2][4][4], const PackedLinear& w, int m,
                                          int m0, int col0, T* y) {
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
        *reinterpret_cast<uint32_t*>(y + int64_t{row} * w.n + col) =
            packed_detail::PackPair<T>(acc[i][j][2 * h] * scale, acc[i][j][2 * h + 1] * scale);
      }
    }
  }
}

}  // namespace packed_mma

// Grid (ceil(n / 64), ceil(m / 64)), kPackedMmaThreads threads. At least 3 blocks per SM caps
// registers at 168: without a minimum ptxas picked its own, tighter cap and spilled (sm_100a).
template <typename T, PackedScheme kScheme>
__global__ void __launch_bounds__(kPackedMmaThreads, 3)
    PackedLinearMmaKernel(const T* __restrict__ x, int m, PackedLinear w, T* __restrict__ y) {
  using namespace packed_mma;
  constexpr int kATile = kPackedMmaTileM * kAStride, kBTile = kPackedMmaTileN * kBStride<kScheme>;
  constexpr int kSumFloats = PackedHasMins(kScheme) ? kPackedMmaTileM * kGroupsPerTile : 1;
  TESSERA_SHARED(T, a_tiles, kStages * kATile);
  TESSERA_SHARED(uint8_t, b_tiles, kStages * kBTile);
  TESSERA_SHARED(float, scale_tiles, kStages * kScaleFloats<kScheme>);
  TESSERA_SHARED(float, sums, kSumFloats);
  const int m0 = blockIdx.y * kPackedMmaTileM, n0 = blockIdx.x * kPackedMmaTileN;
  const int tiles = w.k / kPackedMmaTileK;
  packed_detail::RawGroupScale raw[kScalesPerThread<kScheme>];
  for (int t = 0; t < kStages - 1; ++t) {  // tiles 0 and 1 (k >= 64: tile 0 exists)
    if (t < tiles) {
      LoadTiles<T, kScheme>(x, m, w, m0, n0, t * kPackedMmaTileK, a_tiles + t * kATile,
                            b_tiles + t * kBTile);
      LoadTileScales<kScheme>(w, n0, t * kPackedMmaTileK, raw);
      StoreTileScales<kScheme>(raw, scale_tiles + t * kScaleFloats<kScheme>);
    }
    ptx::CpAsyncCommit();
  }
  float acc[2][4][4] = {};
  for (int kt = 0; kt < tiles; ++kt) {
    const int ahead = kt + kStages - 1, ahead_stage = ahead % kStages, stage = kt % kStages;
    if (ahead < tiles) {  // its stage was released by the previous iteration's last barrier
      LoadTiles<T, kScheme>(x, m, w, m0, n0, ahead * kPackedMmaTileK,
                            a_tiles + ahead_stage * kATile, b_tiles + ahead_stage * kBTile);
      LoadTileScales<kScheme>(w, n0, ahead * kPackedMmaTileK, raw);
    }
    ptx::CpAsyncCommit();
    ptx::CpAsyncWait<kStages - 1>();  // this thread's copies of tile kt have landed
    __syncthreads();                  // and everyone's
    if constexpr (PackedHasMins(kScheme)) {
      GroupSums(a_tiles + stage * kATile, sums);
      __syncthreads();
    }
    ComputeTile<T, kScheme>(a_tiles + stage * kATile, b_tiles + stage * kBTile,
                            scale_tiles + stage * kScaleFloats<kScheme>, sums, acc);
    if (ahead < tiles)
      StoreTileScales<kScheme>(raw, scale_tiles + ahead_stage * kScaleFloats<kScheme>);
    __syncthreads();  // this stage (and sums) may be overwritten after this
  }
  StoreTile<T, kScheme>(acc, w, m, m0, n0, y);
}

}  // namespace tessera::cuda
