#include "kernels/cpu/int8_matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/util/check.h"
#include "common/util/half.h"
#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/int8_matmul_internal.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/simd_target.h"

namespace tessera::kernels::cpu {
namespace int8_internal {

void QuantizeRowPortable(const float* x, int64_t r, const QuantizedRows& rows) {
  for (int64_t b = 0; b < rows.blocks; ++b) {
    const float* xb = x + b * kQuantBlockSize;
    float amax = 0.0f;
    for (int j = 0; j < kQuantBlockSize; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float inverse = amax > 0.0f ? 127.0f / amax : 0.0f;
    int8_t* q = rows.q + r * rows.k + b * kQuantBlockSize;
    int32_t sum = 0;
    for (int j = 0; j < kQuantBlockSize; ++j) {
      const auto v = static_cast<int32_t>(std::nearbyint(xb[j] * inverse));
      q[j] = static_cast<int8_t>(v);
      sum += v;
    }
    const int64_t s = r * rows.blocks + b;
    rows.dx[s] = amax / 127.0f;
    rows.xsum[s] = sum;
    rows.sx[s] = rows.dx[s] * static_cast<float>(sum);
  }
}

// Unsigned code u_j of element j of one GGUF block.
int CodeOf(WeightFormat format, const uint8_t* block, int j) {
  if (format == WeightFormat::kQ8_0) {
    return reinterpret_cast<const BlockQ8_0*>(block)->qs[j] + 128;
  }
  const uint8_t* qs = format == WeightFormat::kQ4_1 ? block + 4 : block + 2;
  return j < 16 ? qs[j] & 0x0F : qs[j - 16] >> 4;
}

void GroupTilePortable(WeightFormat format, const uint8_t* group, int64_t blocks,
                       const QuantizedRows& x, int64_t row0, int rows, float* y, int64_t ldy,
                       int valid_cols) {
  const Int8Layout layout = LayoutOf(format);
  for (int r = 0; r < rows; ++r) {
    const int8_t* xq = x.q + (row0 + r) * x.k;
    const float* dx = x.dx + (row0 + r) * x.blocks;
    const int32_t* xsum = x.xsum + (row0 + r) * x.blocks;
    for (int c = 0; c < valid_cols; ++c) {
      float acc = 0.0f;
      for (int64_t b = 0; b < blocks; ++b) {
        const uint8_t* p = group + b * layout.GroupBlockBytes();
        const uint8_t* codes = p + layout.ScaleBytes();
        int32_t isum = -layout.code_offset * xsum[b];
        for (int j = 0; j < kQuantBlockSize; ++j) {
          isum += PackedCode(layout, codes, c, j) * xq[b * kQuantBlockSize + j];
        }
        const float d = util::HalfToFloat(LoadHalf(p, c));
        acc = std::fma(d * dx[b], static_cast<float>(isum), acc);
        if (layout.has_min) {
          const float mw = util::HalfToFloat(LoadHalf(p + 2 * kInt8GroupRows, c));
          acc = std::fma(mw, x.sx[(row0 + r) * x.blocks + b], acc);
        }
      }
      y[r * ldy + c] = acc;
    }
  }
}

}  // namespace int8_internal

using int8_internal::Int8Kernels;
using int8_internal::Int8Layout;
using int8_internal::LayoutOf;
using int8_internal::QuantizedRows;

bool Int8MatmulSupportsFormat(WeightFormat format) {
  return format == WeightFormat::kQ8_0 || format == WeightFormat::kQ4_0 ||
         format == WeightFormat::kQ4_1;
}

size_t PackedInt8Bytes(WeightFormat format, int64_t rows, int64_t cols) {
  const int64_t groups = (rows + kInt8GroupRows - 1) / kInt8GroupRows;
  return static_cast<size_t>(groups * (cols / kQuantBlockSize)) *
         LayoutOf(format).GroupBlockBytes();
}

Int8WeightView PackInt8Weights(const WeightView& w, std::span<uint8_t> out) {
  TESSERA_CHECK(Int8MatmulSupportsFormat(w.format), "PackInt8Weights: unsupported format");
  TESSERA_CHECK(w.cols % kQuantBlockSize == 0, "PackInt8Weights: cols % 32 != 0");
  const size_t bytes = PackedInt8Bytes(w.format, w.rows, w.cols);
  TESSERA_CHECK(out.size() >= bytes, "PackInt8Weights: output buffer too small");
  std::memset(out.data(), 0, bytes);  // padding rows: zero scales and codes
  const Int8Layout layout = LayoutOf(w.format);
  const int64_t blocks = w.cols / kQuantBlockSize;
  const size_t block_bytes = FormatBlockBytes(w.format);
  for (int64_t row = 0; row < w.rows; ++row) {
    const int c = static_cast<int>(row % kInt8GroupRows);
    uint8_t* group = out.data() + (row / kInt8GroupRows) * blocks * layout.GroupBlockBytes();
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* block = w.Row(row) + b * block_bytes;
      uint8_t* p = group + b * layout.GroupBlockBytes();
      std::memcpy(p + 2 * c, block, 2);                                               // d
      if (layout.has_min) std::memcpy(p + 2 * kInt8GroupRows + 2 * c, block + 2, 2);  // m
      uint8_t* codes = p + layout.ScaleBytes();
      for (int j = 0; j < kQuantBlockSize; ++j) {
        int8_internal::StorePackedCode(layout, codes, c, j,
                                       int8_internal::CodeOf(w.format, block, j));
      }
    }
  }
  return {w.format, out.data(), w.rows, w.cols};
}

namespace {

// Quantized activations of the current call, grown on demand and reused (one per calling thread).
struct ActivationScratch {
  AlignedVector<int8_t> q;
  std::vector<float> dx;
  std::vector<int32_t> xsum;
  std::vector<float> sx;
};

QuantizedRows QuantizeActivations(ThreadPool& pool, std::span<const float> x, int64_t m, int64_t k,
                                  const Int8Kernels& kernels) {
  thread_local ActivationScratch scratch;
  const int64_t blocks = k / kQuantBlockSize;
  if (static_cast<int64_t>(scratch.q.size()) < m * k) scratch.q.resize(m * k);
  if (static_cast<int64_t>(scratch.dx.size()) < m * blocks) {
    scratch.dx.resize(m * blocks);
    scratch.xsum.resize(m * blocks);
    scratch.sx.resize(m * blocks);
  }
  const QuantizedRows rows{
      scratch.q.data(), scratch.dx.data(), scratch.xsum.data(), scratch.sx.data(), k, blocks};
  auto quantize = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) kernels.quantize_row(x.data() + r * k, r, rows);
  };
  constexpr int64_t kParallelRows = 16;  // below this, a fork/join costs more than the work
  if (m < kParallelRows) {
    quantize(0, m);
  } else {
    pool.ParallelFor(m, quantize);
  }
  return rows;
}

// Rows [0, m) of groups [begin, end) of one output.
void RunGroups(const Int8MatmulOutput& out, const QuantizedRows& x, int64_t m, int64_t begin,
               int64_t end, const Int8Kernels& kernels) {
  const Int8Layout layout = LayoutOf(out.w.format);
  const int64_t blocks = out.w.cols / kQuantBlockSize;
  const size_t group_bytes = blocks * layout.GroupBlockBytes();
  for (int64_t g = begin; g < end; ++g) {
    const int64_t col0 = g * kInt8GroupRows;
    const int valid =
        static_cast<int>(out.w.rows - col0 < kInt8GroupRows ? out.w.rows - col0 : kInt8GroupRows);
    const uint8_t* group = out.w.data + g * group_bytes;
    for (int64_t row0 = 0; row0 < m; row0 += int8_internal::kMaxTileRows) {
      const int rows = static_cast<int>(
          m - row0 < int8_internal::kMaxTileRows ? m - row0 : int8_internal::kMaxTileRows);
      float* y = out.y.data() + row0 * out.w.rows + col0;
      kernels.group_tile(out.w.format, group, blocks, x, row0, rows, y, out.w.rows, valid);
    }
  }
}

void CheckOutput(std::span<const float> x, int64_t m, int64_t k, const Int8MatmulOutput& out) {
  TESSERA_CHECK(Int8MatmulSupportsFormat(out.w.format), "Int8Matmul: unsupported weight format");
  TESSERA_CHECK(out.w.cols == k, "Int8Matmul: outputs differ in k");
  TESSERA_CHECK(out.w.data != nullptr || out.w.rows == 0, "Int8Matmul: null weights");
  TESSERA_CHECK(static_cast<int64_t>(x.size()) >= m * k, "Int8Matmul: x is smaller than [m, k]");
  TESSERA_CHECK(static_cast<int64_t>(out.y.size()) >= m * out.w.rows,
                "Int8Matmul: y is smaller than [m, n]");
}

}  // namespace

bool Int8VnniSupported() {
#if TESSERA_X86_SIMD
  static const bool supported = [] {
    __builtin_cpu_init();
    return IsaSupported(Isa::kAvx512) && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vnni");
  }();
  return supported;
#else
  return false;
#endif
}

namespace {

const Int8Kernels& KernelsFor(Isa isa) {
  static constexpr Int8Kernels kPortable{int8_internal::QuantizeRowPortable,
                                         int8_internal::GroupTilePortable};
  static constexpr Int8Kernels kAvx2{int8_internal::QuantizeRowAvx2, int8_internal::GroupTileAvx2};
  static constexpr Int8Kernels kVnni{int8_internal::QuantizeRowVnni, int8_internal::GroupTileVnni};
  if (isa == Isa::kAvx512 && Int8VnniSupported()) return kVnni;
  if (isa == Isa::kAvx512 || isa == Isa::kAvx2) return kAvx2;
  return kPortable;
}

}  // namespace

void Int8MatmulSameInput(ThreadPool& pool, std::span<const float> x, int64_t m,
                         std::span<const Int8MatmulOutput> outputs, Isa isa) {
  constexpr size_t kMaxOutputs = 4;
  TESSERA_CHECK(!outputs.empty() && outputs.size() <= kMaxOutputs,
                "Int8MatmulSameInput: 1 to 4 outputs");
  TESSERA_CHECK(IsaSupported(isa), "Int8Matmul: ISA not supported by this CPU");
  TESSERA_CHECK(m >= 0, "Int8Matmul: negative m");
  const int64_t k = outputs[0].w.cols;
  TESSERA_CHECK(k % kQuantBlockSize == 0, "Int8Matmul: k % 32 != 0");
  int64_t first_group[kMaxOutputs + 1] = {0};
  for (size_t i = 0; i < outputs.size(); ++i) {
    CheckOutput(x, m, k, outputs[i]);
    first_group[i + 1] = first_group[i] + (outputs[i].w.rows + kInt8GroupRows - 1) / kInt8GroupRows;
  }
  if (m == 0 || k == 0 || first_group[outputs.size()] == 0) {
    for (const Int8MatmulOutput& out : outputs) {
      std::fill(out.y.begin(), out.y.begin() + m * out.w.rows, 0.0f);
    }
    return;
  }
  const Int8Kernels& kernels = KernelsFor(isa);
  const QuantizedRows rows = QuantizeActivations(pool, x, m, k, kernels);
  pool.ParallelFor(first_group[outputs.size()], [&](int64_t begin, int64_t end) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      const int64_t lo = begin > first_group[i] ? begin : first_group[i];
      const int64_t hi = end < first_group[i + 1] ? end : first_group[i + 1];
      if (lo < hi) RunGroups(outputs[i], rows, m, lo - first_group[i], hi - first_group[i], kernels);
    }
  });
}

}  // namespace tessera::kernels::cpu
