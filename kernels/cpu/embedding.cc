#include "kernels/cpu/embedding.h"

#include "common/util/check.h"
#include "kernels/cpu/quant.h"

namespace tessera::kernels::cpu {

void EmbeddingLookup(const WeightView& table, std::span<const int32_t> ids, std::span<float> out) {
  const int64_t d = table.cols;
  TESSERA_CHECK(static_cast<int64_t>(out.size()) >= static_cast<int64_t>(ids.size()) * d,
                "EmbeddingLookup: out is smaller than [num_ids, d]");
  for (size_t t = 0; t < ids.size(); ++t) {
    TESSERA_CHECK(ids[t] >= 0 && ids[t] < table.rows, "EmbeddingLookup: token id out of range");
    DequantizeRow(table.format, table.Row(ids[t]), out.subspan(t * d, d));
  }
}

}  // namespace tessera::kernels::cpu
