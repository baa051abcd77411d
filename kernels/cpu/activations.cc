#include "kernels/cpu/activations.h"

#include <cstdint>

#include "common/util/check.h"
#include "kernels/cpu/simd_avx2.h"
#include "kernels/cpu/simd_avx512.h"
#include "kernels/cpu/simd_scalar.h"

namespace tessera::kernels::cpu {

namespace scalar {
#include "kernels/cpu/activations_impl.inc"
}  // namespace scalar

#if TESSERA_X86_SIMD
TESSERA_BEGIN_TARGET_AVX2
namespace avx2 {
#include "kernels/cpu/activations_impl.inc"
}  // namespace avx2
TESSERA_END_TARGET

TESSERA_BEGIN_TARGET_AVX512
namespace avx512 {
#include "kernels/cpu/activations_impl.inc"
}  // namespace avx512
TESSERA_END_TARGET
#endif

void SwiGlu(std::span<const float> gate, std::span<const float> up, std::span<float> out,
            Isa isa) {
  TESSERA_CHECK(gate.size() == up.size() && up.size() == out.size(),
                "SwiGlu: gate, up and out must have the same size");
  TESSERA_CHECK(IsaSupported(isa), "SwiGlu: ISA not supported by this CPU");
  const int64_t n = static_cast<int64_t>(out.size());
  switch (isa) {
#if TESSERA_X86_SIMD
    case Isa::kAvx512:
      return avx512::SwiGluImpl(gate.data(), up.data(), out.data(), n);
    case Isa::kAvx2:
      return avx2::SwiGluImpl(gate.data(), up.data(), out.data(), n);
#endif
    default:
      return scalar::SwiGluImpl(gate.data(), up.data(), out.data(), n);
  }
}

}  // namespace tessera::kernels::cpu
