// Block-table deltas. The device runner keeps every slot's block table on the device
// ([slots, stride] int32, persistent across steps); a step sends only the entries that changed —
// (index into that array, block id) pairs — and ScatterTableDeltas writes them. GatherRows
// (elementwise.cuh, T = int32_t) then copies the rows of the step's sequences into the
// [rows, stride] table the attention kernels read. So the per-step host->device traffic for block
// tables is 8 bytes per new block instead of a whole row per sequence.
//
// The entry count is read from device memory, so one launch shape serves every step and a CUDA
// graph can replay it: the grid is fixed (kTableDeltaBlocks) and grid-strides over the count.
// Indices outside [0, table_entries) are skipped (the host never sends them; the guard keeps a
// bad delta from writing outside the tables). Indices within one launch must be distinct.
// Bound (H100): launch latency; a decode step sends at most one delta per sequence.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_compat.cuh"
#include "kernels/cuda/launch_shape.h"

namespace tessera::cuda {

inline constexpr int kTableDeltaThreads = 256;
inline constexpr int kTableDeltaBlocks = 8;

struct TableDelta {
  int32_t index;  // slot * stride + logical block
  int32_t block;  // physical block id
};

template <typename Index>
__global__ void __launch_bounds__(kTableDeltaThreads)
    ScatterTableDeltasKernel(const TableDelta* __restrict__ deltas,
                             const Index* __restrict__ count, int32_t* __restrict__ tables,
                             int64_t table_entries) {
  const Index n = *count;
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += Index(gridDim.x) * blockDim.x) {
    const TableDelta d = deltas[i];
    if (d.index >= 0 && d.index < table_entries) tables[d.index] = d.block;
  }
}

// deltas: [>= *count]; count: one int32 on the device; tables: [table_entries] int32.
template <class Launcher>
auto LaunchScatterTableDeltas(Launcher& launcher, const TableDelta* deltas, const int32_t* count,
                              int32_t* tables, int64_t table_entries) {
  const LaunchShape shape{dim3(kTableDeltaBlocks), dim3(kTableDeltaThreads), 0};
  return launcher.Launch(shape, ScatterTableDeltasKernel<int32_t>, deltas, count, tables,
                         table_entries);
}

}  // namespace tessera::cuda
