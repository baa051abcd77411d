// ModelOpt NVFP4: the decoder on values worked out by hand from the format (nibble order, the
// E2M1 table, E4M3 normal and subnormal scales, the global scale), its layout checks, and how a
// checkpoint says it is NVFP4; the repack into ggml's NVFP4 blocks, which must decode (with its
// tensor scale) to the same f32 values, and its fallbacks.
#include "common/safetensors/modelopt_nvfp4.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/gguf/dequantize.h"
#include "common/safetensors/safetensors_writer.h"
#include "tests/unit/safetensors/safetensors_test_util.h"

namespace tessera::safetensors {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

SafetensorsTensor Tensor(std::string name, Dtype dtype, std::vector<uint64_t> shape,
                         const std::vector<uint8_t>& bytes) {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return {std::move(name), dtype, std::move(shape), n, bytes};
}

std::vector<uint8_t> FloatBytes(float value) {
  std::vector<uint8_t> bytes(4);
  std::memcpy(bytes.data(), &value, 4);
  return bytes;
}

// One row of 32 elements: two groups of 16.
struct Fixture {
  std::vector<uint8_t> codes = std::vector<uint8_t>(16, 0);
  std::vector<uint8_t> scales = {0x3C, 0x01};  // 1.5 (exponent 7, mantissa 4/8); 2^-9 (subnormal)
  std::vector<uint8_t> global = FloatBytes(2.0f);
  Fixture() {
    codes[0] = 0x21;   // element 0: code 1 (0.5), element 1: code 2 (1.0)
    codes[1] = 0xF7;   // element 2: code 7 (6), element 3: code 15 (-6)
    codes[2] = 0x9A;   // element 4: code 10 (-1), element 5: code 9 (-0.5)
    codes[8] = 0x07;   // element 16: 6 (second group)
    codes[15] = 0x50;  // element 31: code 5 (3)
  }
  absl::StatusOr<std::vector<float>> Decode() const {
    return DequantizeModelOptNvfp4(Tensor("m.weight", Dtype::kU8, {1, 16}, codes),
                                   Tensor("m.weight_scale", Dtype::kF8E4M3, {1, 2}, scales),
                                   Tensor("m.weight_scale_2", Dtype::kF32, {}, global));
  }
};

TEST(ModelOptNvfp4Test, DecodesNibblesScalesAndTheGlobalScale) {
  absl::StatusOr<std::vector<float>> values = Fixture().Decode();
  ASSERT_TRUE(values.ok()) << values.status();
  std::vector<float> expected(32, 0.0f);
  // e2m1 × 1.5 × 2 in the first group, e2m1 × 2^-9 × 2 in the second.
  expected[0] = 1.5f;
  expected[1] = 3.0f;
  expected[2] = 18.0f;
  expected[3] = -18.0f;
  expected[4] = -3.0f;
  expected[5] = -1.5f;
  expected[16] = 6.0f / 256;
  expected[31] = 3.0f / 256;
  EXPECT_THAT(*values, ElementsAreArray(expected));
}

TEST(ModelOptNvfp4Test, BadLayoutsAndNanScalesNameTheTensor) {
  Fixture nan_scale;
  nan_scale.scales[1] = 0x7F;
  EXPECT_THAT(nan_scale.Decode().status().message(),
              HasSubstr("'m.weight_scale' (F8_E4M3 [1, 2]): scale [0, 1] is NaN"));
  const Fixture f;
  const std::vector<uint8_t> two(2, 0x38);
  const auto weight = Tensor("m.weight", Dtype::kU8, {1, 16}, f.codes);
  const auto scale = Tensor("m.weight_scale", Dtype::kF8E4M3, {1, 2}, f.scales);
  const auto global = Tensor("m.weight_scale_2", Dtype::kF32, {}, f.global);
  EXPECT_THAT(
      DequantizeModelOptNvfp4(Tensor("m.weight", Dtype::kI8, {1, 16}, f.codes), scale, global)
          .status()
          .message(),
      HasSubstr("'m.weight' (I8 [1, 16]): the weight must be U8 [N, K/2]"));
  EXPECT_THAT(
      DequantizeModelOptNvfp4(weight, Tensor("m.weight_scale", Dtype::kF8E4M3, {2, 1}, two), global)
          .status()
          .message(),
      HasSubstr("weight_scale must be F8_E4M3 [1, 2]"));
  EXPECT_THAT(
      DequantizeModelOptNvfp4(weight, scale, Tensor("m.weight_scale_2", Dtype::kF16, {2}, f.global))
          .status()
          .message(),
      HasSubstr("weight_scale_2 must be one F32 value"));
}

// Random codes and scale bytes (every E4M3 byte but NaN and the negative ones) for `rows` rows of
// `cols` elements.
struct RandomWeight {
  std::vector<uint8_t> codes, scales, global = FloatBytes(0.0371f);
  uint64_t rows, cols;
  RandomWeight(uint64_t rows, uint64_t cols, uint32_t seed) : rows(rows), cols(cols) {
    std::mt19937 rng(seed);
    for (uint64_t i = 0; i < rows * cols / 2; ++i) codes.push_back(rng() & 0xFF);
    for (uint64_t i = 0; i < rows * cols / 16; ++i) scales.push_back(rng() % 0x7F);
  }
  SafetensorsTensor Weight() const { return Tensor("m.weight", Dtype::kU8, {rows, cols / 2}, codes); }
  SafetensorsTensor Scale() const {
    return Tensor("m.weight_scale", Dtype::kF8E4M3, {rows, cols / 16}, scales);
  }
  SafetensorsTensor Global() const { return Tensor("m.weight_scale_2", Dtype::kF32, {}, global); }
};

TEST(ModelOptNvfp4Test, GgufBlocksTimesTheTensorScaleAreTheDecodedValues) {
  RandomWeight w(5, 192, 11);
  w.scales[3] = 0x80;  // -0 is 0 in either format
  const auto expected = DequantizeModelOptNvfp4(w.Weight(), w.Scale(), w.Global());
  ASSERT_TRUE(expected.ok()) << expected.status();
  const auto packed = RepackModelOptNvfp4AsGguf(w.Weight(), w.Scale(), w.Global());
  ASSERT_TRUE(packed.ok()) << packed.status();
  ASSERT_TRUE(packed->has_value());
  EXPECT_EQ((*packed)->tensor_scale, 0.0371f);
  ASSERT_EQ((*packed)->blocks.size(), 5u * 192 / 64 * 36);
  auto blocks = gguf::DequantizeToF32(gguf::GgmlType::kNvfp4, (*packed)->blocks, 5 * 192);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  for (float& v : *blocks) v *= (*packed)->tensor_scale;
  EXPECT_THAT(*blocks, ElementsAreArray(*expected));
}

TEST(ModelOptNvfp4Test, WhatGgmlBlocksCannotHoldIsLeftToTheF32Path) {
  const RandomWeight not_64(2, 48, 12);
  auto packed = RepackModelOptNvfp4AsGguf(not_64.Weight(), not_64.Scale(), not_64.Global());
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_FALSE(packed->has_value());
  RandomWeight negative(2, 64, 13);
  negative.scales[5] = 0xB8;  // -1.0
  packed = RepackModelOptNvfp4AsGguf(negative.Weight(), negative.Scale(), negative.Global());
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_FALSE(packed->has_value());
  RandomWeight nan(2, 64, 14);
  nan.scales[6] = 0xFF;
  EXPECT_THAT(RepackModelOptNvfp4AsGguf(nan.Weight(), nan.Scale(), nan.Global()).status().message(),
              HasSubstr("scale [1, 2] is NaN"));
}

// A directory with config.json (`config`), an empty model.safetensors and, when not empty,
// hf_quant_config.json.
std::string QuantDir(const std::string& tag, const std::string& config,
                     const std::string& hf_quant) {
  const std::string dir = testing::FreshDir("nvfp4_" + tag);
  testing::WriteText(dir + "/config.json", config);
  EXPECT_TRUE(SafetensorsWriter().WriteToFile(dir + "/model.safetensors").ok());
  if (!hf_quant.empty()) testing::WriteText(dir + "/hf_quant_config.json", hf_quant);
  return dir;
}

absl::StatusOr<bool> IsNvfp4(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<HfDirectory>> hf = HfDirectory::Open(dir);
  if (!hf.ok()) return hf.status();
  return IsModelOptNvfp4(**hf);
}

TEST(ModelOptNvfp4Test, TheQuantizationConfigSaysNvfp4) {
  EXPECT_EQ(IsNvfp4(QuantDir("plain", "{}", "")).value(), false);
  EXPECT_EQ(IsNvfp4(QuantDir("hf_quant", "{}",
                             R"({"producer": {"name": "modelopt"}, "quantization":
                                 {"quant_algo": "NVFP4", "group_size": 16,
                                  "exclude_modules": ["lm_head"]}})"))
                .value(),
            true);
  EXPECT_EQ(IsNvfp4(QuantDir("config", R"({"quantization_config": {"quant_method": "modelopt",
                                           "quant_algo": "NVFP4"}})",
                             ""))
                .value(),
            true);
  const std::pair<std::string, std::string> bad[] = {
      {QuantDir("fp8", "{}", R"({"quantization": {"quant_algo": "FP8"}})"),
       "quant_algo 'FP8' is not supported"},
      {QuantDir("gptq", R"({"quantization_config": {"quant_method": "gptq"}})", ""),
       "quant_method 'gptq' is not supported"},
      {QuantDir("group", "{}", R"({"quantization": {"quant_algo": "NVFP4", "group_size": 32}})"),
       "group_size 32 is not 16"}};
  for (const auto& [dir, message] : bad) {
    EXPECT_THAT(IsNvfp4(dir).status().message(), HasSubstr(message));
  }
}

TEST(ModelOptNvfp4Test, CompanionTensorsAreRecognized) {
  for (const char* name : {"m.weight_scale", "m.weight_scale_2", "m.input_scale",
                           "model.layers.0.self_attn.k_proj.k_scale"}) {
    EXPECT_TRUE(IsModelOptCompanionTensor(name)) << name;
  }
  EXPECT_FALSE(IsModelOptCompanionTensor("m.weight"));
}

}  // namespace
}  // namespace tessera::safetensors
