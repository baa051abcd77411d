// The streaming decode path of packed_linear.cuh: Y[m, n] = Σ_k X[m, k]·W[n, k] for m <= 4 on
// tensor cores, the packed codes (and X and the group scales) streamed through shared memory by
// cp.async and turned into mma operands by ldmatrix: ~3 instructions per 4-bit weight, against
// 7 (Q4_0) to 13 (NVFP4) for the CUDA-core path (packed_linear_small_m.cuh) and 8 to 21 for the
// register-decode tensor-core path (packed_linear_tc.cuh).
//  - W is A of mma m16n8k16 (tiles of 16 rows). The work is tiles x stages units of 16 rows x
//    64 code bytes, split evenly between the grid's warps in contiguous runs that cross tile
//    boundaries (packed_stream_split.h: the grid is the blocks resident at once, and no wave
//    waits on another). Each warp streams its units, with the rows' scale fields and the
//    stage's X, into a ring of 4 stages (3 in flight) that runs on from one tile into the next:
//    one 16-byte cp.async per lane and row half, 64 contiguous bytes per row. Launched as a
//    programmatic dependent (LaunchShape::dependent): the first 3 stages' weights are issued
//    before the grid dependency wait, their X after it.
//  - ldmatrix.x4 hands lane (g, t) = (lane / 4, lane % 4) word t of rows g and g + 8 of two
//    16-byte chunks: exactly the codes of its A fragment, with every k16 step inside one scale
//    group (a chunk is one 32-input group, two NVFP4 groups, or half a Q8_0 group).
//  - A 4-bit word decodes to four pairs of T (exact small integers c, packed_decode.cuh): one
//    masked OR and one packed subtraction per pair (Q4_0, Q4_1, Q4_K), byte permutes for FP4.
//    B is X (column g: X row g, one 16-byte shared read per lane and chunk); per group the mma
//    sums into a zeroed fragment and acc += D·scale (+ min·Σ x, Σ x from an mma with A = ones)
//    in f32.
//  - NVFP4's chunk holds two groups (lanes t < 2 the first, t >= 2 the second): B carries each X
//    row twice (columns 2i and 2i + 1), each copy read as zeros on the other group's lanes (a
//    zero row), so one mma yields both groups' sums; hence m <= 4.
// A tile is 16 rows of W, or (PackedStreamOutput::kSwiGluHalves, W = [gate | up]) the gate and
// up rows of 8 features, whose store writes silu(gate)·up (the MLP's SwiGlu as the epilogue).
// A tile a warp streams whole, it stores; the warps sharing a tile meet (in the block's shared
// memory, or in the workspace when the tile spans blocks), and the one that completes it adds
// the pieces in warp order (deterministic for a shape and grid) and stores Y. Error bound: as
// every packed path (packed_linear.cuh).
// Shared memory: 8 warps x 4 stages x (1344 + X rows x 272) bytes, 52 KiB (Q4, m = 1) to
// 86 KiB (NVFP4, m = 4), and 8 KiB of meeting records: dynamic, opted in once
// (AllowPackedLinearSharedMemory).
//
// Bound (H200, 4.1 TB/s copy): full bandwidth asks ~31 4-bit weights per SM and clock, i.e. ~3
// warp instructions per clock at ~3 instructions per weight: 75% of the SM's issue rate. Design
// target >= 85% of copy bandwidth at m = 1 for n, k >= 4096. Measured (H200, docs/perf/
// packed-stream.md): 0.36–0.40 of copy bandwidth at n = 4096, k = 14336 (Q4_0 22.9 µs, NVFP4
// 22.8 µs, against 25.7 and 38.5 for the CUDA-core path); ncu: 45% issue-active, 8.3 cycles
// between a warp's instructions, of which 1.8 waiting for the cp.async data and ~5 spread over
// shared-memory, tensor-pipe and dependency stalls; 16 warps per SM (115 registers). A deeper
// ring (8 stages), 256 contiguous bytes per row and 3–4 blocks per SM (80 and 64 registers)
// measured no faster, nor did splitting a tile between fewer warps, nor codes tiled so that a
// warp's stage is 1 KB of contiguous bytes (10-20% slower). Not issue-bound either: NVFP4 costs
// 325 instructions per stage and Q4_0 181, in the same time (docs/perf/packed-stream.md). Those
// measurements are of the block-per-tile split (grid n / 16, each tile's k split between one
// block's 8 warps, at most 16 warps per SM at n = 4096 whatever the register cap, 6.8 waves of
// 4-stage warps at gate/up); the split between all warps is not yet measured.
#pragma once

#include <cstdint>

#include "kernels/cuda/activations.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/packed_decode.cuh"
#include "kernels/cuda/packed_linear_tc.cuh"
#include "kernels/cuda/packed_stream_meet.cuh"
#include "kernels/cuda/packed_stream_split.h"
#include "kernels/cuda/ptx_ops.cuh"

namespace tessera::cuda {

inline constexpr int kPackedStreamThreads = 32 * kPackedStreamWarps;
inline constexpr int kPackedStreamSlots = 4;  // stages in each warp's ring, 3 in flight

namespace packed_stream {

// v, as a value the compiler cannot recompute (an asm mov): keeps the loop-invariant shared
// offsets in registers, where NVVM otherwise re-derived them from the lane in every stage (~60
// more instructions per stage, sm_90a SASS).
__device__ __forceinline__ int OpaqueInt(int v) {
#if defined(__CUDA_ARCH__)
  asm("mov.b32 %0, %0;" : "+r"(v));
#endif
  return v;
}

inline constexpr int kStageBytes = 64;  // code bytes of one row per stage: 4 chunks of 16
inline constexpr int kCodeBytes = kPackedStreamRows * kStageBytes;
inline constexpr int kFieldBytes = 16;  // per row and stage: scales [0, 8), mins [8, 16)
inline constexpr int kSuperOffset = kCodeBytes + kPackedStreamRows * kFieldBytes;
inline constexpr int kXOffset = kSuperOffset + kPackedStreamRows * 4;  // after Q4_K's super words

template <PackedScheme kScheme>
inline constexpr int kStageInputs = kStageBytes * 8 / PackedCodeBits(kScheme);
template <PackedScheme kScheme>
inline constexpr int kStageGroups = kStageInputs<kScheme> / PackedGroupSize(kScheme);
template <PackedScheme kScheme>
inline constexpr int kStageScaleBytes = kStageGroups<kScheme> * PackedScaleBytes(kScheme);
template <PackedScheme kScheme>
inline constexpr int kStageMinBytes = kStageGroups<kScheme> * PackedMinBytes(kScheme);

// A stage's X: kM rows (NVFP4: and a zero row) of the stage's inputs as T, rows 16 bytes apart
// more than their length (the lanes of different rows hit different banks).
template <PackedScheme kScheme>
inline constexpr int kXRowBytes = kStageInputs<kScheme> * 2;
template <PackedScheme kScheme>
inline constexpr int kXStride = kXRowBytes<kScheme> + 16;
template <PackedScheme kScheme, int kM>
inline constexpr int kXRows = kScheme == PackedScheme::kNvfp4 ? kM + 1 : kM;
template <PackedScheme kScheme, int kM>
inline constexpr int kSlotBytes = kXOffset + kXRows<kScheme, kM> * kXStride<kScheme>;

// Byte offset of (row, chunk) in a stage's codes: chunk ^ (row / 2 % 4) keeps the 8 rows of an
// ldmatrix matrix (and the 8 lanes of a cp.async phase) on distinct 16-byte bank groups.
__device__ __forceinline__ int CodeOffset(int row, int chunk) {
  return row * kStageBytes + ((chunk ^ ((row >> 1) & 3)) << 4);
}

// Where a lane's copies go (slot-relative, fixed for the kernel) and come from. Codes: copy h
// takes row lane / 4 + 8h, chunk lane % 4 (a row's 64 bytes in 4 neighbouring lanes). Fields:
// lanes 0-15 copy row lane's scales (and Q4_K super word), 16-31 its mins. X: 16-byte pieces
// lane and lane + 32 of the kM rows.
struct StageTargets {
  int code_offset[2];
  int field_offset;
  int super_offset;
  int x_offset[2];
};

template <PackedScheme kScheme>
__device__ __forceinline__ StageTargets MakeStageTargets(int lane) {
  constexpr int kPieces = kXRowBytes<kScheme> / 16;  // 16-byte pieces of an X row per stage
  StageTargets c{};
  TESSERA_UNROLL
  for (int h = 0; h < 2; ++h) c.code_offset[h] = OpaqueInt(CodeOffset(lane / 4 + 8 * h, lane % 4));
  c.field_offset = OpaqueInt(kCodeBytes + lane % 16 * kFieldBytes + (lane < 16 ? 0 : 8));
  c.super_offset = OpaqueInt(kSuperOffset + lane % 16 * 4);
  TESSERA_UNROLL
  for (int i = 0; i < 2; ++i) {
    const int piece = lane + 32 * i;
    c.x_offset[i] =
        OpaqueInt(kXOffset + piece / kPieces * kXStride<kScheme> + piece % kPieces * 16);
  }
  return c;
}

// The W row that row `row` (0-15) of tile `tile` streams. kProduct: rows 16·tile.., rows past n
// repeating row n - 1. kSwiGluHalves (W = [gate | up], width = n / 2): rows 0-7 are gate
// features 8·tile.., rows 8-15 the same features' up rows (width + 8·tile..), features past width
// repeating the last. Repeated rows are computed, never stored.
__device__ __forceinline__ int64_t TileSourceRow(const PackedLinear& w, PackedStreamOutput output,
                                                 int tile, int row) {
  if (output == PackedStreamOutput::kProduct) {
    const int n0 = tile * kPackedStreamRows;
    const int rows = w.n - n0 < kPackedStreamRows ? w.n - n0 : kPackedStreamRows;
    return int64_t{n0} + (row < rows ? row : rows - 1);
  }
  constexpr int kFeatures = kPackedStreamRows / 2;
  const int width = w.n / 2, f0 = tile * kFeatures;
  const int features = width - f0 < kFeatures ? width - f0 : kFeatures;
  const int feature = row % kFeatures < features ? row % kFeatures : features - 1;
  return int64_t{row < kFeatures ? 0 : width} + f0 + feature;
}

// The weight sources of the units of one tile (units tile·stages + s): the copy of unit u comes
// from origin + u x its bytes per unit (64 of codes, a stage's fields; Q4_K's super word from
// super + u / 2 x 4, stages being even), so a unit's address is one multiply-add whatever its
// tile. The rows: TileSourceRow.
struct UnitSources {
  const uint8_t* codes[2];
  const uint8_t* fields;
  const uint8_t* super;
};

template <PackedScheme kScheme>
__device__ __forceinline__ UnitSources MakeUnitSources(const PackedLinear& w,
                                                       PackedStreamOutput output, int tile,
                                                       int stages, int lane) {
  const int64_t first = int64_t{tile} * stages;  // the tile's first unit
  UnitSources c{};
  TESSERA_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int64_t source_row = TileSourceRow(w, output, tile, lane / 4 + 8 * h);
    c.codes[h] = w.codes + source_row * PackedRowCodeBytes(kScheme, w.k) + lane % 4 * 16 -
                 first * kStageBytes;
  }
  const int64_t source_row = TileSourceRow(w, output, tile, lane % 16);
  const int64_t group = source_row * (w.k / PackedGroupSize(kScheme));
  c.fields = lane < 16 ? w.scales + group * PackedScaleBytes(kScheme) -
                             first * kStageScaleBytes<kScheme>
                       : w.mins + group * PackedMinBytes(kScheme) -
                             first * kStageMinBytes<kScheme>;  // null + 0 without mins
  if constexpr (kScheme == PackedScheme::kQ4_K) {
    c.super = reinterpret_cast<const uint8_t*>(w.super_scales) +
              source_row * (w.k / kPackedSuperGroup) * 4 - first / 2 * 4;
  }
  return c;
}

// The lane's X pieces of stage 0 (stage s adds s·kXRowBytes); X rows past m repeat row m - 1.
struct XSources {
  const uint8_t* x[2];
};

template <typename T, PackedScheme kScheme>
__device__ __forceinline__ XSources MakeXSources(const T* x, int m, int k, int lane) {
  constexpr int kPieces = kXRowBytes<kScheme> / 16;
  XSources c{};
  TESSERA_UNROLL
  for (int i = 0; i < 2; ++i) {
    const int piece = lane + 32 * i, x_row = piece / kPieces;
    const int source_x_row = x_row < m ? x_row : m - 1;
    c.x[i] = reinterpret_cast<const uint8_t*>(x + int64_t{source_x_row} * k) +
             piece % kPieces * 16;
  }
  return c;
}

// Issues the weight copies of unit `unit` into `slot`: codes, scale (and min) fields, Q4_K's
// super-scale word (constant for the launch: they may be issued before the grid dependency).
template <PackedScheme kScheme>
__device__ __forceinline__ void IssueUnitWeights(const UnitSources& c, const StageTargets& to,
                                                 int lane, int unit, uint8_t* slot) {
  TESSERA_UNROLL
  for (int h = 0; h < 2; ++h) {
    ptx::CpAsync16(slot + to.code_offset[h], c.codes[h] + int64_t{unit} * kStageBytes);
  }
  if (lane < 16) {
    ptx::CpAsyncSmall<kStageScaleBytes<kScheme>>(
        slot + to.field_offset, c.fields + int64_t{unit} * kStageScaleBytes<kScheme>);
    if constexpr (kScheme == PackedScheme::kQ4_K) {
      ptx::CpAsyncSmall<4>(slot + to.super_offset, c.super + int64_t{unit} / 2 * 4);
    }
  } else if constexpr (PackedHasMins(kScheme)) {
    ptx::CpAsyncSmall<kStageMinBytes<kScheme>>(
        slot + to.field_offset, c.fields + int64_t{unit} * kStageMinBytes<kScheme>);
  }
}

// Issues the X copies of stage `stage` into `slot` (X: the previous kernel's output).
template <PackedScheme kScheme, int kM>
__device__ __forceinline__ void IssueStageX(const XSources& c, const StageTargets& to, int lane,
                                            int stage, uint8_t* slot) {
  constexpr int kXPieces = kM * kXRowBytes<kScheme> / 16;
  static_assert(kXPieces <= 64);
  TESSERA_UNROLL
  for (int i = 0; i < (kXPieces + 31) / 32; ++i) {
    if (kXPieces % 32 == 0 || lane + 32 * i < kXPieces) {
      ptx::CpAsync16(slot + to.x_offset[i], c.x[i] + int64_t{stage} * kXRowBytes<kScheme>);
    }
  }
}

// Group `j` of the stage's raw scale fields of one row (`fields`: its 16-byte record, `super`:
// Q4_K's word).
template <PackedScheme kScheme>
__device__ __forceinline__ packed_detail::GroupScale ScaleOf(const uint4& fields, uint32_t super,
                                                             int j) {
  const uint32_t words[4] = {fields.x, fields.y, fields.z, fields.w};
  packed_detail::RawGroupScale raw;
  if constexpr (PackedScaleBytes(kScheme) == 2) {
    raw.scale = (words[j / 2] >> (16 * (j % 2))) & 0xFFFFu;
  } else {
    raw.scale = (words[j / 4] >> (8 * (j % 4))) & 0xFFu;
  }
  if constexpr (kScheme == PackedScheme::kQ4_1) {
    raw.min = (words[2 + j / 2] >> (16 * (j % 2))) & 0xFFFFu;
  }
  if constexpr (kScheme == PackedScheme::kQ4_K) {
    raw.min = (words[2] >> (8 * j)) & 0xFFu;
    raw.super = super;
  }
  return packed_detail::DecodeGroupScale<kScheme>(raw);
}

// acc += one group's sums d (rows g, g + 8 x columns 2t, 2t + 1) times the rows' scales, plus
// min·Σ x (dx) for the schemes with mins. Columns 2t + 1 only for kM > 1.
template <PackedScheme kScheme, int kM>
__device__ __forceinline__ void ApplyGroup(const packed_detail::GroupScale (&s)[2],
                                           const float (&d)[4], const float (&dx)[4],
                                           float (&acc)[4]) {
  TESSERA_UNROLL
  for (int i = 0; i < 4; ++i) {
    if (kM == 1 && i % 2 == 1) continue;
    acc[i] = __fmaf_rn(s[i / 2].scale, d[i], acc[i]);
    if constexpr (PackedHasMins(kScheme)) acc[i] = __fmaf_rn(s[i / 2].min, dx[i], acc[i]);
  }
}

// One chunk (32 inputs) of a 4-bit scheme: words of rows g and g + 8, the lane's X values.
template <typename T, PackedScheme kScheme, int kM>
__device__ __forceinline__ void ComputeChunk4(uint32_t word_g, uint32_t word_h, const uint4& xv,
                                              const uint4 (&fields)[2], const uint32_t (&super)[2],
                                              int chunk, float (&acc)[4]) {
  uint32_t pg[4], ph[4], b[4];
  packed_tc::DecodeWord4<T, kScheme>(word_g, pg);
  packed_tc::DecodeWord4<T, kScheme>(word_h, ph);
  packed_tc::XPairs<kScheme>(xv, 0, b[0], b[1]);
  packed_tc::XPairs<kScheme>(xv, 1, b[2], b[3]);
  float d[4] = {};
  const uint32_t a0[4] = {pg[0], ph[0], pg[1], ph[1]}, b0[2] = {b[0], b[1]};
  const uint32_t a1[4] = {pg[2], ph[2], pg[3], ph[3]}, b1[2] = {b[2], b[3]};
  ptx::MmaM16N8K16<packed_tc::kMmaType<T>>(d, a0, b0, d);
  ptx::MmaM16N8K16<packed_tc::kMmaType<T>>(d, a1, b1, d);
  if constexpr (kScheme == PackedScheme::kNvfp4) {  // columns 2t, 2t + 1: X row t, groups 2c, 2c+1
    TESSERA_UNROLL
    for (int r = 0; r < 2; ++r) {  // the pair of E4M3 scales at bytes 2c, 2c + 1; c = 2·e2m1
      const uint32_t words[4] = {fields[r].x, fields[r].y, fields[r].z, fields[r].w};
      const float2 s = packed_detail::E4M3PairToFloat2(words[chunk / 2] >> (16 * (chunk % 2)));
      acc[2 * r] = __fmaf_rn(s.x, d[2 * r], acc[2 * r]);  // the 1/2 at the output
      acc[2 * r] = __fmaf_rn(s.y, d[2 * r + 1], acc[2 * r]);
    }
  } else {
    float dx[4] = {};
    if constexpr (PackedHasMins(kScheme)) {
      constexpr uint32_t kOnes = packed_tc::kOnesPair<T>;
      const uint32_t ones[4] = {kOnes, kOnes, kOnes, kOnes};
      ptx::MmaM16N8K16<packed_tc::kMmaType<T>>(dx, ones, b0, dx);
      ptx::MmaM16N8K16<packed_tc::kMmaType<T>>(dx, ones, b1, dx);
    }
    const packed_detail::GroupScale s[2] = {ScaleOf<kScheme>(fields[0], super[0], chunk),
                                            ScaleOf<kScheme>(fields[1], super[1], chunk)};
    ApplyGroup<kScheme, kM>(s, d, dx, acc);
  }
}

// Slot-relative offsets a lane reads, fixed for the kernel: its ldmatrix row of each chunk pair,
// the field records of rows g and g + 8, their Q4_K super words.
struct LaneReads {
  int ldmatrix[2];
  int x;       // the lane's B row in the stage's X, at its 8 (Q8_0: 4) inputs of chunk 0
  int fields;  // row g; row g + 8 is 8 records on
  int super;
};

// One stage from its slot: two ldmatrix.x4 (chunks 2p, 2p + 1 of rows g, g + 8), decode, mma.
template <typename T, PackedScheme kScheme, int kM>
__device__ __forceinline__ void ComputeStage(const uint8_t* slot, const LaneReads& reads,
                                             float (&acc)[4]) {
  constexpr int kChunkXBytes = kXRowBytes<kScheme> / 4;
  constexpr int kRowsApart = 8 * kFieldBytes;
  const uint4 fields[2] = {*reinterpret_cast<const uint4*>(slot + reads.fields),
                           *reinterpret_cast<const uint4*>(slot + reads.fields + kRowsApart)};
  uint32_t super[2] = {0u, 0u};
  if constexpr (kScheme == PackedScheme::kQ4_K) {
    super[0] = *reinterpret_cast<const uint32_t*>(slot + reads.super);
    super[1] = *reinterpret_cast<const uint32_t*>(slot + reads.super + 32);
  }
  TESSERA_UNROLL
  for (int p = 0; p < 2; ++p) {
    uint32_t r[4];  // word t of: row g chunk 2p, row g + 8 chunk 2p, row g 2p + 1, row g + 8 2p + 1
    ptx::LdMatrix<4>(r, slot + reads.ldmatrix[p]);
    if constexpr (PackedCodeBits(kScheme) == 8) {  // a pair is one 32-input group
      float d[4] = {};
      TESSERA_UNROLL
      for (int c = 0; c < 2; ++c) {
        uint32_t pg[2], ph[2];
        packed_tc::DecodeWord8<T>(r[2 * c], pg);
        packed_tc::DecodeWord8<T>(r[2 * c + 1], ph);
        const uint32_t a[4] = {pg[0], ph[0], pg[1], ph[1]};
        const uint2 xv =
            *reinterpret_cast<const uint2*>(slot + reads.x + (2 * p + c) * kChunkXBytes);
        const uint32_t b[2] = {xv.x, xv.y};
        ptx::MmaM16N8K16<packed_tc::kMmaType<T>>(d, a, b, d);
      }
      const float dx[4] = {};
      const packed_detail::GroupScale s[2] = {ScaleOf<kScheme>(fields[0], 0u, p),
                                              ScaleOf<kScheme>(fields[1], 0u, p)};
      ApplyGroup<kScheme, kM>(s, d, dx, acc);
    } else {
      TESSERA_UNROLL
      for (int c = 0; c < 2; ++c) {
        const uint4 xv =
            *reinterpret_cast<const uint4*>(slot + reads.x + (2 * p + c) * kChunkXBytes);
        ComputeChunk4<T, kScheme, kM>(r[2 * c], r[2 * c + 1], xv, fields, super, 2 * p + c, acc);
      }
    }
  }
}

// The lane's reads of every stage (and, for NVFP4, the ring's zero rows written). B column g: X
// row g (rows past kM read row kM - 1: columns never stored), or for NVFP4 X row g / 2 on the
// lanes of group g % 2 (t / 2 == g % 2) and the zero row kM on the others.
template <PackedScheme kScheme, int kM>
__device__ __forceinline__ LaneReads MakeLaneReads(uint8_t* slots, int lane) {
  constexpr int kSlot = kSlotBytes<kScheme, kM>;
  const int g = lane / 4, t = lane % 4;
  int x_row = g < kM ? g : kM - 1;
  if constexpr (kScheme == PackedScheme::kNvfp4) {
    x_row = g / 2 < kM && t / 2 == g % 2 ? g / 2 : kM;
    constexpr int kZeroWords = kXStride<kScheme> / 4;
    for (int i = lane; i < kPackedStreamSlots * kZeroWords; i += 32) {  // never copied to
      reinterpret_cast<uint32_t*>(slots + i / kZeroWords * kSlot + kXOffset +
                                  kM * kXStride<kScheme>)[i % kZeroWords] = 0u;
    }
  }
  // ldmatrix: lane l gives row l % 8 (+ 8 for odd matrices) of matrix l / 8.
  const int ldm_row = lane % 8 + 8 * (lane / 8 % 2);
  return {{CodeOffset(ldm_row, lane / 16), CodeOffset(ldm_row, 2 + lane / 16)},
          kXOffset + x_row * kXStride<kScheme> + t * (PackedCodeBits(kScheme) == 8 ? 8 : 16),
          kCodeBytes + g * kFieldBytes,
          kSuperOffset + g * 4};
}

// The tile's outputs from its summed fragment (rows g, g + 8; columns as ComputeChunk4 and
// ComputeStage leave them), NVFP4's tensor scale and the 1/2 of c = 2·e2m1 applied (exact: a
// power of two). kProduct: Y rows 16·tile... kSwiGluHalves: out[., f] = silu(gate)·up of
// feature f = 8·tile + g (element i gate, i + 2 up), each rounded to T first: the arithmetic of
// the product stored and then SwiGluHalves (activations.cuh); the same bits where both launches
// split a row's k-sum at the same stages (a block per tile).
template <typename T, PackedScheme kScheme>
__device__ __forceinline__ void StoreTile(const float (&total)[4], int m, const PackedLinear& w,
                                          PackedStreamOutput output, T* y, int tile, int lane) {
  const int g = lane / 4, t = lane % 4;
  const float scale = kScheme == PackedScheme::kNvfp4 ? w.tensor_scale * 0.5f : 1.0f;
  // NVFP4: X row t in elements 0 and 2; otherwise X row 2t + i % 2.
  auto out_row = [&](int i) {
    return kScheme == PackedScheme::kNvfp4 ? (i % 2 == 0 ? t : m) : 2 * t + i % 2;
  };
  if (output == PackedStreamOutput::kSwiGluHalves) {
    const int width = w.n / 2, feature = tile * (kPackedStreamRows / 2) + g;
    TESSERA_UNROLL
    for (int i = 0; i < 2; ++i) {
      if (out_row(i) >= m || feature >= width) continue;
      const float gate = ToFloat(FromFloat<T>(total[i] * scale));
      const float up = ToFloat(FromFloat<T>(total[i + 2] * scale));
      y[int64_t{out_row(i)} * width + feature] = FromFloat<T>(SwiGluValue(gate, up));
    }
    return;
  }
  TESSERA_UNROLL
  for (int i = 0; i < 4; ++i) {
    const int row = tile * kPackedStreamRows + g + 8 * (i / 2);
    if (out_row(i) < m && row < w.n) {
      y[int64_t{out_row(i)} * w.n + row] = FromFloat<T>(total[i] * scale);
    }
  }
}

// The end of a warp's piece of `tile` (piece_stages units): stored when it is the whole tile,
// else met (MeetAtTile) and stored by the warp that completes the tile; acc zeroed.
template <typename T, PackedScheme kScheme>
__device__ __forceinline__ void EndPiece(const PackedStreamWorkspace& ws,
                                         const PackedStreamSplit& split, int warp, int tile,
                                         int piece_stages, int m, const PackedLinear& w,
                                         PackedStreamOutput output, T* y, float* block_records,
                                         uint32_t* block_counts, int lane, float (&acc)[4]) {
  float total[4] = {acc[0], acc[1], acc[2], acc[3]};
  if (piece_stages == split.stages ||
      MeetAtTile(PlaceOfTile(ws, split, tile, block_records, block_counts), split, warp, tile,
                 piece_stages, acc, lane, total)) {
    StoreTile<T, kScheme>(total, m, w, output, y, tile, lane);
  }
  TESSERA_UNROLL
  for (int i = 0; i < 4; ++i) acc[i] = 0.0f;
}

}  // namespace packed_stream

namespace packed_stream {
// A block's shared meeting place after the rings: its warps' records, then their counters.
template <PackedScheme kScheme, int kM>
inline constexpr int kRecordsOffset =
    kPackedStreamWarps * kPackedStreamSlots * kSlotBytes<kScheme, kM>;
inline constexpr int kMeetBytes = int(PackedStreamPartialFloats(1) * 4) + kPackedStreamWarps * 4;
}  // namespace packed_stream

// Dynamic shared memory of a launch: every warp's ring, and the block's meeting place.
template <PackedScheme kScheme, int kM>
inline constexpr int kPackedStreamSharedBytes =
    packed_stream::kRecordsOffset<kScheme, kM> + packed_stream::kMeetBytes;

// Grid PackedStreamBlocks(PackedStreamTiles(n, output), stages, ws.blocks, ws.grid),
// split.warps = grid x kPackedStreamWarps, kPackedStreamThreads threads, kPackedStreamSharedBytes
// of dynamic shared memory (opted in: AllowPackedLinearSharedMemory); k a multiple of one
// stage's inputs (128, or 64 for Q8_0); kM: m rounded up to 1, 2 or 4; ws as
// packed_stream_split.h requires. kMinBlocks: the blocks per SM the register cap makes room for
// (the worker's kPackedStreamBlocksPerSm; benchmarks try others).
template <typename T, PackedScheme kScheme, int kM, int kMinBlocks = kPackedStreamBlocksPerSm>
__global__ void __launch_bounds__(kPackedStreamThreads, kMinBlocks)
    PackedLinearStreamKernel(const T* __restrict__ x, int m, PackedLinear w, T* __restrict__ y,
                             PackedStreamWorkspace ws, PackedStreamSplit split,
                             PackedStreamOutput output) {
  using namespace packed_stream;
  constexpr int kSlots = kPackedStreamSlots, kSlot = kSlotBytes<kScheme, kM>;
  TESSERA_DYNAMIC_SHARED(uint8_t, ring);
  const int lane = threadIdx.x % 32;
  const int warp = blockIdx.x * kPackedStreamWarps + threadIdx.x / 32;
  uint8_t* const slots = ring + OpaqueInt(threadIdx.x / 32 * kSlots * kSlot);
  float* const block_records = reinterpret_cast<float*>(ring + kRecordsOffset<kScheme, kM>);
  uint32_t* const block_counts =
      reinterpret_cast<uint32_t*>(block_records + PackedStreamPartialFloats(1));
  if (threadIdx.x < kPackedStreamWarps) block_counts[threadIdx.x] = 0u;
  __syncthreads();  // the counters are zero before any warp meets
  const int u0 = split.Start(warp), u1 = split.Start(warp + 1);
  if (u0 == u1) {  // no units (a grid of more warps than units)
    ptx::GridDependencyWait();
    ptx::LaunchDependents();
    return;
  }
  // The issue side: the tile of the next unit to issue, and where the tile after it starts.
  int issue_tile = u0 / split.stages, next_tile_unit = (issue_tile + 1) * split.stages;
  UnitSources sources = MakeUnitSources<kScheme>(w, output, issue_tile, split.stages, lane);
  const StageTargets targets = MakeStageTargets<kScheme>(lane);
  const XSources x_sources = MakeXSources<T, kScheme>(x, m, w.k, lane);
  auto issue_weights = [&](int unit, uint8_t* slot) {  // units in order
    if (unit == next_tile_unit) {
      sources = MakeUnitSources<kScheme>(w, output, ++issue_tile, split.stages, lane);
      next_tile_unit += split.stages;
    }
    IssueUnitWeights<kScheme>(sources, targets, lane, unit, slot);
  };
  // The first stages' weights go in flight before the grid dependency (a dependent launch runs
  // this while the kernel that writes X drains); their X after it, in one more group.
  TESSERA_UNROLL
  for (int d = 0; d < kSlots - 1; ++d) {
    if (u0 + d < u1) issue_weights(u0 + d, slots + d * kSlot);
    ptx::CpAsyncCommit();
  }
  ptx::GridDependencyWait();
  ptx::LaunchDependents();
  TESSERA_UNROLL
  for (int d = 0; d < kSlots - 1; ++d) {
    if (u0 + d < u1) {
      IssueStageX<kScheme, kM>(x_sources, targets, lane, (u0 + d) % split.stages,
                               slots + d * kSlot);
    }
  }
  ptx::CpAsyncCommit();
  const LaneReads reads = MakeLaneReads<kScheme, kM>(slots, lane);
  float acc[4] = {};
  int tile = u0 / split.stages, piece_begin = u0 % split.stages;
  // Units to the end of the current piece (its tile's end or the warp's last unit).
  int piece_left = split.stages - piece_begin < u1 - u0 ? split.stages - piece_begin : u1 - u0;
  // Unit u in slot (u - u0) % kSlots: wait for its copies, issue unit u + kSlots - 1 into the
  // slot unit u - 1 used, compute; at the end of a tile or of the warp's units, the piece is
  // stored or met. The first stages' X came in the newest group: wait for all once.
  ptx::CpAsyncWait<0>();
  for (int base = u0; base < u1; base += kSlots) {  // warp-uniform
    TESSERA_UNROLL
    for (int slot = 0; slot < kSlots; ++slot) {  // constant slot offsets
      const int u = base + slot;
      if (u >= u1) break;
      ptx::CpAsyncWait<kSlots - 2>();
      __syncwarp();  // every lane's copies of unit u landed; unit u - 1's slot is read
      if (u + kSlots - 1 < u1) {
        uint8_t* const next = slots + (slot + kSlots - 1) % kSlots * kSlot;
        issue_weights(u + kSlots - 1, next);
        IssueStageX<kScheme, kM>(x_sources, targets, lane,
                                 u + kSlots - 1 - (next_tile_unit - split.stages), next);
      }
      ptx::CpAsyncCommit();
      ComputeStage<T, kScheme, kM>(slots + slot * kSlot, reads, acc);
      if (--piece_left > 0) continue;
      EndPiece<T, kScheme>(ws, split, warp, tile, u + 1 - (tile * split.stages + piece_begin),
                           m, w, output, y, block_records, block_counts, lane, acc);
      ++tile;
      piece_begin = 0;
      piece_left = split.stages < u1 - u - 1 ? split.stages : u1 - u - 1;
    }
  }
  ptx::CpAsyncWait<0>();
}

}  // namespace tessera::cuda
