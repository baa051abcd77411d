#include "common/gguf/quantize_fp4.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/gguf/fp4_codec.h"

namespace tessera::gguf {
namespace {

// Largest |value|, skipping NaN (a NaN never compares greater), as ggml's reference quantizers.
float AbsMax(const float* x, size_t n) {
  float amax = 0.0f;
  for (size_t j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
  }
  return amax;
}

// The E8M0 byte ggml's reference picks: floor(log2(amax)) - 2 + 127 in float (the largest E2M1
// magnitude, 6 = 1.5 * 2^2, then covers amax's binade). Clamped to [0, 254] where ggml's
// float -> uint8_t conversion is undefined (amax < 2^-125 or infinite).
uint8_t Mxfp4Exponent(float amax) {
  if (!(amax > 0.0f)) return 0;
  const float e = std::floor(std::log2(amax)) - 2 + 127;
  if (!(e > 0.0f)) return 0;
  return static_cast<uint8_t>(e < 254.0f ? e : 254.0f);
}

// The first code whose value kE2M1Doubled[code] * d is nearest to x (ggml's best_index_mxfp4).
uint8_t NearestMxfp4Code(float x, float d) {
  uint8_t best = 0;
  float best_err = std::fabs(static_cast<float>(fp4::kE2M1Doubled[0]) * d - x);
  for (uint8_t i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(fp4::kE2M1Doubled[i]) * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

// One 16-element NVFP4 sub-block: its scale byte and 8 code bytes (low nibble element j, high
// nibble element j + 8).
void QuantizeNvfp4SubBlock(const float* x, float tensor_scale, uint8_t* scale, uint8_t* qs) {
  const float amax = AbsMax(x, 16);
  *scale = fp4::FloatToE4M3(amax / 6.0f / tensor_scale);
  // The byte's E4M3 value: ggml decodes it halved, against doubled element values.
  const float divisor = 2.0f * fp4::Ue4m3ToFloatHalf(*scale) * tensor_scale;
  for (int j = 0; j < 8; ++j) {
    const uint8_t lo = divisor > 0.0f ? fp4::FloatToE2M1(x[j] / divisor) : 0;
    const uint8_t hi = divisor > 0.0f ? fp4::FloatToE2M1(x[j + 8] / divisor) : 0;
    qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

}  // namespace

void QuantizeMxfp4Block(std::span<const float, kMxfp4BlockElements> x,
                        std::span<uint8_t, kMxfp4BlockBytes> block) {
  const uint8_t e = Mxfp4Exponent(AbsMax(x.data(), x.size()));
  const float d = fp4::E8M0ToFloatHalf(e);
  block[0] = e;
  for (int j = 0; j < 16; ++j) {
    const uint8_t lo = NearestMxfp4Code(x[j], d);
    const uint8_t hi = NearestMxfp4Code(x[j + 16], d);
    block[1 + j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

float Nvfp4TensorScale(std::span<const float> x) {
  const float amax = AbsMax(x.data(), x.size());
  return amax > 0.0f ? amax / (6.0f * 448.0f) : 1.0f;
}

void QuantizeNvfp4Block(std::span<const float, kNvfp4BlockElements> x, float tensor_scale,
                        std::span<uint8_t, kNvfp4BlockBytes> block) {
  for (int s = 0; s < 4; ++s) {
    QuantizeNvfp4SubBlock(x.data() + 16 * s, tensor_scale, &block[s], &block[4 + 8 * s]);
  }
}

absl::StatusOr<Nvfp4Tensor> QuantizeNvfp4Tensor(std::span<const float> x) {
  if (x.size() % kNvfp4BlockElements != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quantize: ", x.size(), " values is not a multiple of the NVFP4 block size 64"));
  }
  Nvfp4Tensor out;
  out.tensor_scale = Nvfp4TensorScale(x);
  const size_t num_blocks = x.size() / kNvfp4BlockElements;
  out.blocks.resize(num_blocks * kNvfp4BlockBytes);
  for (size_t b = 0; b < num_blocks; ++b) {
    QuantizeNvfp4Block(x.subspan(b * kNvfp4BlockElements).first<kNvfp4BlockElements>(),
                       out.tensor_scale,
                       std::span(out.blocks).subspan(b * kNvfp4BlockBytes).first<kNvfp4BlockBytes>());
  }
  return out;
}

}  // namespace tessera::gguf
