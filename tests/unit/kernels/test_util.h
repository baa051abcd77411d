// Helpers shared by the CPU kernel tests: seeded random data, quantized weight buffers and
// tolerance checks.
#pragma once

#include "common/gguf/dequantize.h"
#include "common/util/check.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/weight_format.h"

namespace tessera::kernels::cpu {

// gtest prints Isa parameters by name.
inline void PrintTo(Isa isa, std::ostream* os) { *os << IsaName(isa); }

}  // namespace tessera::kernels::cpu

namespace tessera::kernels::cpu::testing {

inline std::vector<float> RandomVector(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A weight matrix [rows, cols] owned together with its view.
struct OwnedWeights {
  std::vector<uint8_t> bytes;
  WeightView view;
};

// Quantizes (or copies) random f32 values into `format`. cols must be a multiple of 32 for the
// block formats.
inline OwnedWeights MakeWeights(WeightFormat format, int64_t rows, int64_t cols, uint64_t seed) {
  const std::vector<float> f = RandomVector(static_cast<size_t>(rows * cols), seed);
  OwnedWeights w;
  auto encoded = gguf::QuantizeFromF32(ToGgmlType(format), f);  // ggml reference rounding
  TESSERA_CHECK(encoded.ok(), "MakeWeights: format has no reference encoder");
  w.bytes = std::move(*encoded);
  w.view = WeightView{format, w.bytes.data(), rows, cols};
  return w;
}

// A matrix [rows, cols] of random MXFP4 / NVFP4 blocks: random codes, and scale bytes from the
// whole range (MXFP4 exponents below 231, so that dot products of values in [-1, 1] over a few
// thousand elements stay finite; every UE4M3 byte, 0x7F and 0xFF included).
inline OwnedWeights RandomBlockWeights(WeightFormat format, int64_t rows, int64_t cols,
                                       uint64_t seed) {
  TESSERA_CHECK(format == WeightFormat::kMxfp4 || format == WeightFormat::kNvfp4,
                "RandomBlockWeights: FP4 formats only");
  std::mt19937_64 rng(seed);
  OwnedWeights w;
  w.bytes.resize(RowBytes(format, cols) * static_cast<size_t>(rows));
  for (uint8_t& b : w.bytes) b = static_cast<uint8_t>(rng());
  if (format == WeightFormat::kMxfp4) {
    for (size_t i = 0; i < w.bytes.size(); i += sizeof(BlockMxfp4)) w.bytes[i] %= 231;
  }
  w.view = WeightView{format, w.bytes.data(), rows, cols};
  return w;
}

// The same matrix dequantized to f32.
inline OwnedWeights DequantizedCopy(const WeightView& w) {
  OwnedWeights out;
  out.bytes.resize(static_cast<size_t>(w.rows * w.cols) * sizeof(float));
  auto* f = reinterpret_cast<float*>(out.bytes.data());
  for (int64_t r = 0; r < w.rows; ++r) {
    DequantizeRow(w.format, w.Row(r), {f + r * w.cols, static_cast<size_t>(w.cols)});
  }
  out.view = WeightView{WeightFormat::kF32, out.bytes.data(), w.rows, w.cols};
  return out;
}

inline bool BitEqual(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// |a - b| <= abs_tol + rel_tol * |b| elementwise; reports the first mismatch.
inline ::testing::AssertionResult AllNear(std::span<const float> a, std::span<const float> b,
                                          double abs_tol, double rel_tol = 0.0) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "size mismatch";
  for (size_t i = 0; i < a.size(); ++i) {
    const double diff = std::fabs(double{a[i]} - double{b[i]});
    if (!(diff <= abs_tol + rel_tol * std::fabs(double{b[i]}))) {
      return ::testing::AssertionFailure()
             << "index " << i << ": " << a[i] << " vs " << b[i] << " (diff " << diff << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

inline std::string IsaParamName(const ::testing::TestParamInfo<Isa>& info) {
  return std::string(IsaName(info.param));
}

}  // namespace tessera::kernels::cpu::testing
