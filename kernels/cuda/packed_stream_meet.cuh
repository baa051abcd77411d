// Where the warps of the streaming decode path (packed_linear_stream.cuh) that share a row tile
// meet, and how (packed_stream_split.h has the split): each writes its piece (its f32 mma
// fragment) to its record, fences and counts its stages in on the tile's counter; the warp that
// completes the count adds every piece in warp order and stores the tile. Device code, called
// by the streaming kernel's warps when a piece ends (never in the stage loop).
#pragma once

#include <cstdint>

#include "kernels/cuda/device_compat.cuh"
#include "kernels/cuda/packed_stream_split.h"

namespace tessera::cuda::packed_stream {

// Where the warps of a shared tile meet: the block's shared records and counters when they
// are all warps of one block, else the workspace's.
struct MeetPlace {
  float* records;     // [warps from `first_warp`][2][kPackedStreamPieceFloats]
  uint32_t* count;    // the tile's counter (its first warp's)
  int first_warp;     // the warp of records[0]
  int tile_first, tile_last;  // the warps whose units hold the tile's first and last stage
  bool local;
};

__device__ __forceinline__ MeetPlace PlaceOfTile(const PackedStreamWorkspace& ws,
                                                 const PackedStreamSplit& split, int tile,
                                                 float* block_records, uint32_t* block_counts) {
  const int first = split.WarpOf(tile * split.stages);
  const int last = split.WarpOf((tile + 1) * split.stages - 1);
  if (first / kPackedStreamWarps == last / kPackedStreamWarps) {
    return {block_records, block_counts + first % kPackedStreamWarps,
            first / kPackedStreamWarps * kPackedStreamWarps, first, last, true};
  }
  return {ws.partials, ws.arrivals + first, 0, first, last, false};
}

// A warp's piece of a shared tile (packed_stream_split.h): written to its record, counted in;
// the warp that completes the tile's count adds every piece in warp order into `total` and
// returns true (and zeroes the counter).
__device__ __forceinline__ bool MeetAtTile(const MeetPlace& place, const PackedStreamSplit& split,
                                           int warp, int tile, int piece_stages,
                                           const float (&acc)[4], int lane, float (&total)[4]) {
  auto record = [&](int owner) {  // a warp's record for `tile`: its first tile's or its last's
    const int slot = split.Start(owner) / split.stages == tile ? 0 : 1;
    return place.records + (owner - place.first_warp) * 2 * kPackedStreamPieceFloats +
           slot * kPackedStreamPieceFloats + lane;
  };
  auto fence = [&] {  // the pieces are visible before the count says so, read after it
    if (place.local) {
      __threadfence_block();
    } else {
      __threadfence();
    }
  };
  float* const own = record(warp);
  TESSERA_UNROLL
  for (int i = 0; i < 4; ++i) own[i * 32] = acc[i];
  fence();
  __syncwarp();
  uint32_t before = 0;
  if (lane == 0) before = atomicAdd(place.count, static_cast<uint32_t>(piece_stages));
  before = __shfl_sync(0xFFFFFFFFu, before, 0);
  if (before + piece_stages != static_cast<uint32_t>(split.stages)) return false;
  fence();
  __syncwarp();  // lane 0's acquire (its atomic, then the fence) orders every lane's reads
  TESSERA_UNROLL
  for (int i = 0; i < 4; ++i) total[i] = 0.0f;
  for (int owner = place.tile_first; owner <= place.tile_last; ++owner) {
    if (split.Start(owner) == split.Start(owner + 1)) continue;  // a warp with no units
    const float* const piece = record(owner);
    TESSERA_UNROLL
    for (int i = 0; i < 4; ++i) total[i] += place.local ? piece[i * 32] : __ldcg(piece + i * 32);
  }
  __syncwarp();  // every lane has read before the counter is reset
  if (lane == 0) *place.count = 0u;
  return true;
}

}  // namespace tessera::cuda::packed_stream
