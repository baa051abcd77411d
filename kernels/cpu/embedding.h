// Token embedding lookup: out[t, d] = table[ids[t], :], dequantized to f32.
// The table is any WeightView format DequantizeRow reads (F32, F16, BF16, Q8_0, Q4_0, Q4_1);
// SmolLM2's token_embd is Q8_0 [vocab, 576]. Exact (see quant.h); single-threaded (d per token).
#pragma once

#include <cstdint>
#include <span>

#include "kernels/cpu/weight_format.h"

namespace tessera::kernels::cpu {

// Preconditions: every id in [0, table.rows) (the worker validates ids before this);
// out.size() >= ids.size() * table.cols.
void EmbeddingLookup(const WeightView& table, std::span<const int32_t> ids, std::span<float> out);

}  // namespace tessera::kernels::cpu
