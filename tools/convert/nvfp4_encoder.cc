#include "tools/convert/nvfp4_encoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>

#include "common/gguf/dequantize.h"
#include "common/gguf/gguf_writer.h"
#include "common/util/check.h"
#include "common/util/status_macros.h"

namespace tessera::convert {
namespace {

constexpr uint64_t kGroup = 16;
constexpr float kE2m1Max = 6.0f;
constexpr float kE4m3Max = 448.0f;
constexpr float kE2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// The value of non-negative E4M3 code `code` (0..0x7E; 0x7F is NaN).
float E4m3Value(uint8_t code) {
  const int e = code >> 3;
  const int m = code & 7;
  return e == 0 ? m * 0x1.0p-9f : (8 + m) * std::ldexp(1.0f, e - 10);
}

// Nearest non-negative E4M3 code to `x` >= 0 (ties to the smaller code), saturating at 448.
uint8_t NearestE4m3(float x) {
  uint8_t best = 0;
  for (uint8_t code = 1; code < 0x7F; ++code) {
    if (std::abs(E4m3Value(code) - x) < std::abs(E4m3Value(best) - x)) best = code;
  }
  return best;
}

// Nearest E2M1 code to `x` (sign in bit 3; ties to the smaller magnitude).
uint8_t NearestE2m1(float x) {
  uint8_t best = 0;
  for (uint8_t i = 1; i < 8; ++i) {
    if (std::abs(kE2m1[i] - std::abs(x)) < std::abs(kE2m1[best] - std::abs(x))) best = i;
  }
  return x < 0 && best != 0 ? static_cast<uint8_t>(best | 8) : best;
}

}  // namespace

Nvfp4Matrix EncodeNvfp4(std::span<const float> values, uint64_t rows, uint64_t cols) {
  TESSERA_CHECK(values.size() == rows * cols && cols % kGroup == 0, "EncodeNvfp4: bad shape");
  Nvfp4Matrix m;
  float amax = 0.0f;
  for (float v : values) amax = std::max(amax, std::abs(v));
  m.global_scale = amax > 0 ? amax / (kE2m1Max * kE4m3Max) : 1.0f;
  m.codes.assign(rows * cols / 2, 0);
  m.scales.resize(rows * cols / kGroup);
  m.values.resize(rows * cols);
  for (uint64_t g = 0; g < rows * cols / kGroup; ++g) {
    const std::span<const float> group = values.subspan(g * kGroup, kGroup);
    float group_max = 0.0f;
    for (float v : group) group_max = std::max(group_max, std::abs(v));
    m.scales[g] = NearestE4m3(group_max / kE2m1Max / m.global_scale);
    const float scale = E4m3Value(m.scales[g]);
    for (uint64_t i = 0; i < kGroup; ++i) {
      const uint64_t at = g * kGroup + i;
      const uint8_t code = scale > 0 ? NearestE2m1(group[i] / (scale * m.global_scale)) : 0;
      m.codes[at / 2] |= static_cast<uint8_t>(at % 2 == 0 ? code : code << 4);
      const float magnitude = kE2m1[code & 7];
      m.values[at] = ((code & 8) != 0 ? -magnitude : magnitude) * scale * m.global_scale;
    }
  }
  return m;
}

bool IsNvfp4Linear(std::string_view name) {
  for (std::string_view suffix :
       {".attn_q.weight", ".attn_k.weight", ".attn_v.weight", ".attn_output.weight",
        ".ffn_gate.weight", ".ffn_up.weight", ".ffn_down.weight"}) {
    if (name.ends_with(suffix)) return true;
  }
  return false;
}

namespace {

// The matrix as ggml's NVFP4 blocks: per row, per 64 elements, the four group scales, then for
// each group 8 bytes holding element i (low nibble) and element i + 8 (high nibble), i < 8.
std::vector<uint8_t> GgmlNvfp4Blocks(const Nvfp4Matrix& m, uint64_t rows, uint64_t cols) {
  constexpr uint64_t kBlock = 64;
  TESSERA_CHECK(cols % kBlock == 0, "GgmlNvfp4Blocks: K is not a multiple of 64");
  auto code_of = [&](uint64_t element) {
    return static_cast<uint8_t>((m.codes[element / 2] >> (element % 2 == 0 ? 0 : 4)) & 0xF);
  };
  std::vector<uint8_t> out;
  out.reserve(rows * cols / kBlock * 36);
  for (uint64_t first = 0; first < rows * cols; first += kBlock) {
    for (uint64_t g = 0; g < kBlock / kGroup; ++g) out.push_back(m.scales[first / kGroup + g]);
    for (uint64_t g = 0; g < kBlock / kGroup; ++g) {
      const uint64_t base = first + g * kGroup;
      for (uint64_t i = 0; i < kGroup / 2; ++i) {
        out.push_back(static_cast<uint8_t>(code_of(base + i) | code_of(base + i + 8) << 4));
      }
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<uint8_t>> SnapLinearsToNvfp4(const gguf::GgufFile& file) {
  gguf::GgufWriter writer(3, file.alignment());
  for (const gguf::GgufMetadataEntry& entry : file.metadata()) {
    if (entry.key != "general.alignment") writer.AddValue(entry.key, entry.value);
  }
  for (const gguf::GgufTensorInfo& t : file.tensors()) {
    if (!IsNvfp4Linear(t.name)) {
      writer.AddTensor(t.name, t.dims, t.type, file.TensorData(t));
      continue;
    }
    TESSERA_ASSIGN_OR_RETURN(const std::vector<float> values,
                             gguf::DequantizeToF32(t.type, file.TensorData(t), t.num_elements));
    const Nvfp4Matrix m = EncodeNvfp4(values, t.dims[1], t.dims[0]);
    writer.AddTensor(t.name, t.dims, gguf::GgmlType::kNvfp4, GgmlNvfp4Blocks(m, t.dims[1], t.dims[0]));
    if (m.global_scale != 1.0f) {
      std::vector<uint8_t> scale(sizeof(float));
      std::memcpy(scale.data(), &m.global_scale, sizeof(float));
      const std::string module = t.name.substr(0, t.name.size() - std::string_view(".weight").size());
      writer.AddTensor(module + ".scale", {1}, gguf::GgmlType::kF32, scale);
    }
  }
  return writer.Serialize();
}

}  // namespace tessera::convert
