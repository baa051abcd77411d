// How the streaming decode path (packed_linear_stream.cuh) splits a launch between its warps, and
// the workspace in which the warps that share a row tile meet ("stream-K", as Marlin's striped
// partitioning): the work is tiles x stages units (a tile: 16 rows of W; a stage: 128 inputs,
// 64 for Q8_0), laid out tile after tile; warp g of the grid's W warps takes the contiguous
// units [units·g / W, units·(g + 1) / W), crossing tile boundaries. So every warp streams the
// same number of stages (±1) from launch to end, with no wave of blocks waiting on another and
// its cp.async ring running on from one tile into the next; the grid is the blocks resident at
// once (PackedStreamWorkspace::blocks), not n / 16.
//
// A tile whose units all fall to one warp is stored by that warp. The other tiles are shared by
// consecutive warps: each writes its piece (its f32 mma fragment, 4 x 32 floats) to its record,
// fences, and adds its stage count to the counter of the tile's first warp (a warp is the first
// of at most one shared tile); the warp that completes the count adds the pieces in warp order (k
// order: deterministic for a given shape and grid) and stores the tile, then zeroes the counter.
// Warps of one block meet in its shared memory; a tile that spans blocks meets in the caller's
// workspace, whose counters every launch leaves at zero. A warp has two records: a piece of its
// first tile, and one of its last. When the tiles fit the grid, a block takes one tile (its 8
// warps meet in shared memory, as a block-per-tile split).
// Host and device (the kernel computes its span; the launch, the grid and the workspace size).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/packed_format.h"

namespace tessera::cuda {

inline constexpr int kPackedStreamRows = 16;  // W rows per tile (one mma row tile)
inline constexpr int kPackedStreamWarps = 8;  // per block
inline constexpr int kPackedStreamMinStages = 4;  // per warp: the grid shrinks below this
inline constexpr int kPackedStreamPieceFloats = 4 * 32;  // a warp's accumulator fragment
// The grid the worker sizes the workspace for: blocks per SM (the kernel's register and shared
// memory budget allows 2).
inline constexpr int kPackedStreamBlocksPerSm = 2;

inline constexpr int kPackedStreamMaxM = 4;  // rows of X the streaming path takes

// Whether the streaming path takes inputs k of `scheme`: k a multiple of one stage's inputs
// (128 for the 4-bit schemes, 64 for Q8_0).
TESSERA_PACKED_HOST_DEVICE constexpr bool PackedStreamTakes(PackedScheme scheme, int64_t k) {
  return k % (scheme == PackedScheme::kQ8_0 ? 64 : 128) == 0;
}

// Whether the SwiGlu epilogue (packed_linear.cuh's LaunchPackedLinearSwiGlu) takes (m, w): the
// streaming path's rows and k, W's rows the two halves [gate | up].
inline bool PackedLinearSwiGluTakes(int m, const PackedLinear& w) {
  return m >= 1 && m <= kPackedStreamMaxM && PackedStreamTakes(w.scheme, w.k) && w.n % 2 == 0;
}

// What a launch's tiles are and store. kProduct: Y = X·Wᵀ, a tile 16 rows of W. kSwiGluHalves
// (W = [gate | up], n = 2 x width rows; the MLP's merged projection): out[m, width] =
// silu(X·gateᵀ)·(X·upᵀ), a tile the gate and up rows of 8 features, so one store has both
// (vLLM's SiluAndMul, here in the GEMM's epilogue; one launch fewer per layer).
enum class PackedStreamOutput { kProduct, kSwiGluHalves };

// Tiles of a launch over n rows of W.
TESSERA_PACKED_HOST_DEVICE constexpr int PackedStreamTiles(int n, PackedStreamOutput output) {
  return output == PackedStreamOutput::kProduct
             ? (n + kPackedStreamRows - 1) / kPackedStreamRows
             : (n / 2 + kPackedStreamRows / 2 - 1) / (kPackedStreamRows / 2);
}

// How a launch whose tiles fit in the resident blocks is split: a block per tile (its warps
// meet in shared memory; fewer warps run than fit), or over every resident block like a larger
// launch (more warps streaming, their tiles met in the workspace). Larger launches always take
// every resident block.
enum class PackedStreamGrid { kBlockPerTileWhenTilesFit, kEveryResidentBlock };

// The split's scratch, owned by the caller: `partials` [blocks x kPackedStreamWarps x 2 x
// kPackedStreamPieceFloats] f32 and `arrivals` [blocks x kPackedStreamWarps] u32, zero before
// the first launch (every launch leaves them zero; launches that share a workspace run one after
// another). `blocks`: the most blocks of a launch, those resident at once (SMs x blocks per SM).
struct PackedStreamWorkspace {
  float* partials = nullptr;
  uint32_t* arrivals = nullptr;
  int blocks = 0;
  PackedStreamGrid grid = PackedStreamGrid::kBlockPerTileWhenTilesFit;
};

// Floats of the partials of `blocks` blocks (also a block's shared records, blocks = 1).
TESSERA_PACKED_HOST_DEVICE constexpr size_t PackedStreamPartialFloats(int blocks) {
  return size_t(blocks) * kPackedStreamWarps * 2 * kPackedStreamPieceFloats;
}

// Bytes of a workspace for `blocks` (partials first, then the counters).
inline size_t PackedStreamWorkspaceBytes(int blocks) {
  return PackedStreamPartialFloats(blocks) * sizeof(float) +
         size_t(blocks) * kPackedStreamWarps * sizeof(uint32_t);
}

// The workspace laid out over `memory` (PackedStreamWorkspaceBytes(blocks) bytes, 4-byte
// aligned).
inline PackedStreamWorkspace PackedStreamWorkspaceAt(void* memory, int blocks) {
  float* const partials = static_cast<float*>(memory);
  return {partials, reinterpret_cast<uint32_t*>(partials + PackedStreamPartialFloats(blocks)),
          blocks};
}

// The units of one launch and their owners.
struct PackedStreamSplit {
  int stages = 0;  // per tile
  int units = 0;   // tiles x stages
  int warps = 0;   // of the grid

  // The first unit of warp `warp` (== the next warp's start when it has none).
  TESSERA_PACKED_HOST_DEVICE int Start(int warp) const {
    return static_cast<int>(int64_t{units} * warp / warps);
  }
  // The warp whose units hold `unit`: the last warp starting at or before it.
  TESSERA_PACKED_HOST_DEVICE int WarpOf(int unit) const {
    return static_cast<int>((int64_t{unit + 1} * warps + units - 1) / units) - 1;
  }
};

// Blocks of a launch of `tiles` x `stages` units: enough that each warp has
// kPackedStreamMinStages, at most `cap` (PackedStreamWorkspace::blocks), at least 1; one per tile
// when the tiles fit and `grid` says so.
inline int PackedStreamBlocks(int tiles, int stages, int cap,
                              PackedStreamGrid grid = PackedStreamGrid::kBlockPerTileWhenTilesFit) {
  const int per_block = kPackedStreamWarps * kPackedStreamMinStages;
  const int64_t wanted = (int64_t{tiles} * stages + per_block - 1) / per_block;
  const int blocks = wanted < 1 ? 1 : wanted < cap ? static_cast<int>(wanted) : cap;
  return tiles <= blocks && grid == PackedStreamGrid::kBlockPerTileWhenTilesFit ? tiles : blocks;
}

}  // namespace tessera::cuda
