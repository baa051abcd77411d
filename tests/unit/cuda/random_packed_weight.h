// Random packed weights (packed_format.h) for the device tests of the kernels that read them
// (packed linear, packed MoE experts), and their arrays copied to the emulated device.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "common/util/half.h"
#include "kernels/cuda/packed_format.h"
#include "kernels/cuda/packed_weight.h"
#include "tests/unit/cuda/kernel_test_env.h"

namespace tessera::cuda {

inline uint16_t HalfBits(float value) { return util::FloatToHalf(value); }

inline float RandomMagnitude(std::mt19937& rng, float low, float high) {
  const float v = std::uniform_real_distribution<float>(low, high)(rng);
  return (rng() & 1) ? -v : v;
}

// A random weight whose outputs stay well inside f16's range for |x| <= 2, k <= 768. With
// `tiny_scales`, NVFP4's E4M3 scales are only subnormals and the smallest normals (tensor scale
// 1), so a misdecoded subnormal is not lost among larger groups.
inline PackedWeight RandomWeight(PackedScheme scheme, int n, int k, std::mt19937& rng,
                          bool tiny_scales = false) {
  const int groups = n * (k / PackedGroupSize(scheme));
  std::vector<uint8_t> codes(n * PackedRowCodeBytes(scheme, k)), scales, mins;
  std::vector<uint16_t> super;
  for (uint8_t& c : codes) c = static_cast<uint8_t>(rng());
  auto push_half = [](std::vector<uint8_t>& bytes, float value) {
    const uint16_t h = HalfBits(value);
    bytes.push_back(static_cast<uint8_t>(h));
    bytes.push_back(static_cast<uint8_t>(h >> 8));
  };
  float tensor_scale = 1.0f;
  for (int g = 0; g < groups; ++g) {
    switch (scheme) {
      case PackedScheme::kQ8_0:
        push_half(scales, RandomMagnitude(rng, 0x1p-9f, 0x1p-5f));
        break;
      case PackedScheme::kQ4_0:
        push_half(scales, RandomMagnitude(rng, 0x1p-5f, 0.25f));
        break;
      case PackedScheme::kQ4_1:
        push_half(scales, RandomMagnitude(rng, 0x1p-5f, 0.25f));
        push_half(mins, RandomMagnitude(rng, 0.0f, 2.0f));
        break;
      case PackedScheme::kQ4_K:
        scales.push_back(static_cast<uint8_t>(rng() % 64));
        mins.push_back(static_cast<uint8_t>(rng() % 64));
        break;
      case PackedScheme::kNvfp4: {  // any finite E4M3 (448, subnormals), a small tensor scale
        uint8_t s;
        do {
          s = static_cast<uint8_t>(rng());
        } while ((s & 0x7F) == 0x7F);
        scales.push_back(tiny_scales ? s & 0x8F : s);
        tensor_scale = tiny_scales ? 1.0f : 0x1p-9f * 1.375f;
        break;
      }
      case PackedScheme::kMxfp4:
        scales.push_back(static_cast<uint8_t>(118 + rng() % 11));
        break;
    }
  }
  if (scheme == PackedScheme::kQ4_K) {
    for (int s = 0; s < n * (k / 256); ++s) {
      super.push_back(HalfBits(RandomMagnitude(rng, 0x1p-10f, 0x1p-6f)));
      super.push_back(HalfBits(std::fabs(RandomMagnitude(rng, 0x1p-10f, 0x1p-6f))));
    }
  }
  absl::StatusOr<PackedWeight> w =
      PackPlanar(scheme, n, k, codes, scales, mins, super, tensor_scale);
  EXPECT_TRUE(w.ok()) << w.status();
  return *w;
}

// The weight's arrays on the device and its view.
struct DevicePackedWeight {
  explicit DevicePackedWeight(const PackedWeight& w)
      : codes(std::span<const uint8_t>(w.codes)),
        scales(std::span<const uint8_t>(w.scales)),
        mins(std::span<const uint8_t>(w.mins)),
        super(std::span<const uint16_t>(w.super_scales)) {
    view = PackedLinear{w.scheme,
                        w.n,
                        w.k,
                        codes.get(),
                        scales.get(),
                        w.mins.empty() ? nullptr : mins.get(),
                        w.super_scales.empty() ? nullptr : super.get(),
                        w.tensor_scale};
  }
  simt::DeviceBuffer<uint8_t> codes, scales, mins;
  simt::DeviceBuffer<uint16_t> super;
  PackedLinear view;
};

// |min| of each group of row `row` (0 without mins), for the kernel tests' error bounds.
inline float GroupMinMagnitude(const PackedWeight& w, int row, int group) {
  const int index = row * (w.k / PackedGroupSize(w.scheme)) + group;
  if (w.scheme == PackedScheme::kQ4_1) {
    return std::fabs(
        util::HalfToFloat(static_cast<uint16_t>(w.mins[2 * index] | (w.mins[2 * index + 1] << 8))));
  }
  if (w.scheme == PackedScheme::kQ4_K) {
    const uint16_t dmin = w.super_scales[(row * (w.k / 256) + group / 8) * 2 + 1];
    return std::fabs(util::HalfToFloat(dmin) * w.mins[index]);
  }
  return 0.0f;
}

}  // namespace tessera::cuda
