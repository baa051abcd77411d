// Embedding gather kernel on the emulator vs the CPU engine's EmbeddingLookup (kernels/cpu) for
// the formats it reads (F32, F16, BF16, Q8_0, Q4_0, Q4_1) and common/gguf's row decoder for the
// K-quants, with bf16, f16 and f32 outputs, awkward widths and token counts, repeated ids and
// out-of-range ids, under every test schedule.
//
// Tolerance: none. The kernel decodes with the CPU decoder's f32 operations in the same order and
// rounds once to T (see gguf_blocks.cuh); the bit patterns must be identical.
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/gguf/dequantize.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/weight_format.h"
#include "kernels/cuda/embedding.cuh"
#include "tests/unit/cuda/kernel_test_env.h"
#include "tests/unit/cuda/random_gguf_blocks.h"

namespace tessera::cuda {
namespace {

using simt::DeviceBuffer;

// The reference rows [ids.size(), hidden] in f32; ids must be in range.
std::vector<float> ReferenceRows(const FormatCase& c, const std::vector<uint8_t>& table,
                                 int64_t vocab, int hidden, const std::vector<int32_t>& ids) {
  std::vector<float> out(ids.size() * hidden);
  const std::optional<kernels::cpu::WeightFormat> format =
      kernels::cpu::WeightFormatFromGgml(c.ggml_type);
  if (format.has_value()) {
    const kernels::cpu::WeightView view{*format, table.data(), vocab, hidden};
    kernels::cpu::EmbeddingLookup(view, ids, out);
    return out;
  }
  const int64_t row_bytes = GgufRowBytes(c.format, hidden);
  for (size_t t = 0; t < ids.size(); ++t) {
    const std::span<const uint8_t> row(table.data() + ids[t] * row_bytes, row_bytes);
    EXPECT_TRUE(gguf::DequantizeToF32(c.ggml_type, row, hidden,
                                      std::span<float>(out).subspan(t * hidden, hidden))
                    .ok());
  }
  return out;
}

template <typename T>
uint32_t BitsOf(T x) {
  uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof(T));
  return bits;
}

// invalid_ids appends out-of-range ids (whose rows must come back as zeros).
template <typename T>
void CheckEmbedding(const simt::Schedule& schedule, const FormatCase& c, int num_tokens,
                    int blocks_per_row, bool invalid_ids, std::mt19937& rng) {
  const int64_t vocab = 37;
  const int hidden = blocks_per_row * BlockElements(c.format);
  const std::vector<uint8_t> table = RandomBlocks(c, vocab * blocks_per_row, rng);
  std::uniform_int_distribution<int32_t> pick(0, vocab - 1);
  std::vector<int32_t> ids(num_tokens);
  for (int32_t& id : ids) id = pick(rng);
  ids.back() = vocab - 1;  // the last row, next to the buffer's guard page
  if (num_tokens > 1) ids[0] = ids.back();  // a repeated id
  std::vector<int32_t> all_ids = ids;
  if (invalid_ids) all_ids.insert(all_ids.end(), {-1, static_cast<int32_t>(vocab), INT_MAX});
  const int total = static_cast<int>(all_ids.size());

  DeviceBuffer<int32_t> d_ids{std::span<const int32_t>(all_ids)};
  DeviceBuffer<uint8_t> d_table{std::span<const uint8_t>(table)};
  DeviceBuffer<T> d_out(size_t(total) * hidden);
  for (int64_t i = 0; i < total * hidden; ++i) d_out[i] = simt::FloatTo<T>(-7.0f);  // poison
  simt::TestLauncher launcher(schedule);
  ASSERT_TRUE(LaunchEmbedding(launcher, c.format, static_cast<const int32_t*>(d_ids.get()),
                              static_cast<const uint8_t*>(d_table.get()), d_out.get(), total,
                              vocab, hidden)
                  .ok());

  const std::vector<float> expected = ReferenceRows(c, table, vocab, hidden, ids);
  for (int t = 0; t < total; ++t) {
    for (int d = 0; d < hidden; ++d) {
      const float want = t < num_tokens ? expected[size_t(t) * hidden + d] : 0.0f;
      ASSERT_EQ(BitsOf(d_out[size_t(t) * hidden + d]), BitsOf(simt::FloatTo<T>(want)))
          << "format " << static_cast<int>(c.format) << " token " << t << " id " << all_ids[t]
          << " dim " << d << " hidden " << hidden << " expected " << want;
    }
  }
}

class EmbeddingKernelTest : public simt::KernelTest {};

TEST_P(EmbeddingKernelTest, QuantizedAndPlainTablesMatchCpuLookup) {
  std::mt19937 rng(99);
  for (const FormatCase& c : Formats()) {
    SCOPED_TRACE(static_cast<int>(c.format));
    // Rows of 1 and 3 blocks (32/96 or 256/768 elements; plain: 1 and 3 elements) ...
    for (int blocks : {1, 3}) {
      for (int tokens : {1, 3, 17}) {
        CheckEmbedding<__nv_bfloat16>(GetParam(), c, tokens, blocks, false, rng);
      }
      CheckEmbedding<__half>(GetParam(), c, 3, blocks, true, rng);
      CheckEmbedding<float>(GetParam(), c, 3, blocks, true, rng);
    }
    // ... and plain rows at awkward and model-like widths (SmolLM2's hidden is 576).
    if (BlockElements(c.format) == 1) {
      for (int hidden : {15, 16, 17, 97, 576}) {
        CheckEmbedding<__nv_bfloat16>(GetParam(), c, 3, hidden, true, rng);
        CheckEmbedding<float>(GetParam(), c, 1, hidden, false, rng);
      }
    } else if (BlockElements(c.format) == 32) {
      CheckEmbedding<__nv_bfloat16>(GetParam(), c, 3, 18, true, rng);  // 576 wide
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, EmbeddingKernelTest,
                         ::testing::ValuesIn(simt::TestSchedules()),
                         [](const auto& info) { return simt::ScheduleTestName(info.param); });

}  // namespace
}  // namespace tessera::cuda
