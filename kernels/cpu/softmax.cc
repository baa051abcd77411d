#include "kernels/cpu/softmax.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "common/util/check.h"
#include "kernels/cpu/simd_avx2.h"
#include "kernels/cpu/simd_avx512.h"
#include "kernels/cpu/simd_scalar.h"

namespace tessera::kernels::cpu {

namespace scalar {
#include "kernels/cpu/softmax_impl.inc"
}  // namespace scalar

#if TESSERA_X86_SIMD
TESSERA_BEGIN_TARGET_AVX2
namespace avx2 {
#include "kernels/cpu/softmax_impl.inc"
}  // namespace avx2
TESSERA_END_TARGET

TESSERA_BEGIN_TARGET_AVX512
namespace avx512 {
#include "kernels/cpu/softmax_impl.inc"
}  // namespace avx512
TESSERA_END_TARGET
#endif

namespace {

// Calls <isa>::name(args...) for the requested ISA.
#if TESSERA_X86_SIMD
#define TESSERA_DISPATCH(isa, name, ...)                                    \
  ((isa) == Isa::kAvx512 ? avx512::name(__VA_ARGS__)                        \
   : (isa) == Isa::kAvx2 ? avx2::name(__VA_ARGS__)                          \
                         : scalar::name(__VA_ARGS__))
#else
#define TESSERA_DISPATCH(isa, name, ...) scalar::name(__VA_ARGS__)
#endif

void CheckRow(size_t size, Isa isa) {
  TESSERA_CHECK(size > 0, "softmax: empty row");
  TESSERA_CHECK(IsaSupported(isa), "softmax: ISA not supported by this CPU");
}

}  // namespace

float RowMax(std::span<const float> x, Isa isa) {
  CheckRow(x.size(), isa);
  return TESSERA_DISPATCH(isa, RowMaxImpl, x.data(), static_cast<int64_t>(x.size()));
}

void ScaleInPlace(std::span<float> x, float scale, Isa isa) {
  TESSERA_CHECK(IsaSupported(isa), "softmax: ISA not supported by this CPU");
  TESSERA_DISPATCH(isa, AffineImpl, x.data(), static_cast<int64_t>(x.size()), scale, false);
}

float ExpShiftInPlace(std::span<float> x, float shift, Isa isa) {
  TESSERA_CHECK(IsaSupported(isa), "softmax: ISA not supported by this CPU");
  if (x.empty()) return 0.0f;
  return TESSERA_DISPATCH(isa, ExpShiftImpl, x.data(), static_cast<int64_t>(x.size()), shift,
                          x.data());
}

float LogSumExp(std::span<const float> x, Isa isa) {
  const float max = RowMax(x, isa);
  if (std::isinf(max)) return max;  // all -inf (or a +inf element)
  const float sum = TESSERA_DISPATCH(isa, ExpShiftImpl, x.data(), static_cast<int64_t>(x.size()),
                                     max, nullptr);
  return max + std::log(sum);
}

void SoftmaxInPlace(std::span<float> x, Isa isa) {
  const float max = RowMax(x, isa);
  TESSERA_CHECK(std::isfinite(max), "SoftmaxInPlace: row max must be finite");
  const int64_t n = static_cast<int64_t>(x.size());
  const float sum = TESSERA_DISPATCH(isa, ExpShiftImpl, x.data(), n, max, x.data());
  TESSERA_DISPATCH(isa, AffineImpl, x.data(), n, 1.0f / sum, false);
}

void LogSoftmaxInPlace(std::span<float> x, Isa isa) {
  const float max = RowMax(x, isa);
  TESSERA_CHECK(std::isfinite(max), "LogSoftmaxInPlace: row max must be finite");
  const int64_t n = static_cast<int64_t>(x.size());
  const float sum = TESSERA_DISPATCH(isa, ExpShiftImpl, x.data(), n, max, nullptr);
  TESSERA_DISPATCH(isa, AffineImpl, x.data(), n, max + std::log(sum), true);
}

}  // namespace tessera::kernels::cpu
