// Token embedding gather: out[t, :] = table[ids[t], :] decoded to f32 and stored as T.
// ids: [num_tokens] int32; table: the GGUF bytes of a [vocab, hidden] tensor in any GgufFormat
// (F32, F16, BF16 rows, or Q8_0 / Q4_0 / Q4_1 / Q4_K / Q6_K rows that stay quantized on the
// device and are dequantized as they are gathered); out: [num_tokens, hidden] of T (bf16, f16 or
// f32). Values are bit-identical to common/gguf's CPU decoder (gguf_blocks.cuh), rounded once to T.
//
// Out-of-range ids (< 0 or >= vocab): the row is written as zeros and the table is not read. The
// worker validates ids before the step, so this only guarantees no out-of-bounds read.
//
// Design: one block per token; each thread decodes 8 consecutive elements of the row (one block
// scale, 16-byte vector loads for plain tables and 16-byte stores when aligned) and the block is
// sized to the row (a multiple of 32 threads, at most 256) so a 576-wide row leaves no warp idle.
// Bound (H100): memory; reads one table row and writes one output row per token, e.g. 512 tokens
// x 4096 bf16 = 4 MiB in + 4 MiB out ~ 2.5 µs at 3.35 TB/s (a decode step's few rows are launch
// latency). Stores and plain-row loads are contiguous 16-byte accesses across a warp.
#pragma once

#include <cstdint>

#include "kernels/cuda/gguf_blocks.cuh"
#include "kernels/cuda/launch_shape.h"

namespace tessera::cuda {

inline constexpr int kEmbeddingMaxThreads = 256;

template <GgufFormat kFormat, typename T>
__global__ void __launch_bounds__(kEmbeddingMaxThreads)
    EmbeddingKernel(const int32_t* __restrict__ ids, const uint8_t* __restrict__ table,
                    T* __restrict__ out, int64_t vocab, int hidden) {
  const int64_t token = blockIdx.x;
  const int32_t id = ids[token];
  const bool valid = id >= 0 && id < vocab;
  const uint8_t* row = table + (valid ? id : 0) * GgufRowBytes(kFormat, hidden);
  T* out_row = out + token * hidden;
  for (int first = threadIdx.x * kGroupElements; first < hidden;
       first += blockDim.x * kGroupElements) {
    const int count = hidden - first < kGroupElements ? hidden - first : kGroupElements;
    float v[kGroupElements] = {};
    if (valid) DecodeGroup<kFormat>(row, first, count, v);
    StoreGroup(out_row + first, v, count);
  }
}

// One format, chosen at compile time.
// Preconditions: num_tokens > 0 (< 2^31), hidden > 0, hidden % BlockElements(kFormat) == 0;
// table holds vocab rows of GgufRowBytes(kFormat, hidden) bytes; out does not overlap the inputs.
template <class Launcher, GgufFormat kFormat, typename T>
auto LaunchEmbedding(Launcher& launcher, const int32_t* ids, const uint8_t* table, T* out,
                     int num_tokens, int64_t vocab, int hidden) {
  const unsigned groups = CeilDiv(static_cast<unsigned>(hidden), kGroupElements);
  const unsigned threads = CeilDiv(groups, 32) * 32;
  const LaunchShape shape{
      dim3(num_tokens),
      dim3(threads < kEmbeddingMaxThreads ? threads : kEmbeddingMaxThreads), 0};
  return launcher.Launch(shape, EmbeddingKernel<kFormat, T>, ids, table, out, vocab, hidden);
}

// The table's format chosen at run time. Same preconditions; a value outside the enum launches
// an empty grid, which every launcher rejects as a bad configuration.
template <class Launcher, typename T>
auto LaunchEmbedding(Launcher& launcher, GgufFormat format, const int32_t* ids,
                     const uint8_t* table, T* out, int num_tokens, int64_t vocab, int hidden) {
  switch (format) {
#define TESSERA_EMBEDDING_CASE(F) \
  case GgufFormat::F:             \
    return LaunchEmbedding<Launcher, GgufFormat::F, T>(launcher, ids, table, out, num_tokens, vocab, hidden);
    TESSERA_EMBEDDING_CASE(kF32)
    TESSERA_EMBEDDING_CASE(kF16)
    TESSERA_EMBEDDING_CASE(kBF16)
    TESSERA_EMBEDDING_CASE(kQ8_0)
    TESSERA_EMBEDDING_CASE(kQ4_0)
    TESSERA_EMBEDDING_CASE(kQ4_1)
    TESSERA_EMBEDDING_CASE(kQ4_K)
    TESSERA_EMBEDDING_CASE(kQ6_K)
#undef TESSERA_EMBEDDING_CASE
  }
  return launcher.Launch(LaunchShape{dim3(0), dim3(32), 0}, EmbeddingKernel<GgufFormat::kF32, T>,
                         ids, table, out, vocab, hidden);
}

}  // namespace tessera::cuda
