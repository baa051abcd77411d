// NVFP4 expert stacks on a hybrid MoE model: `tessera quantize --to nvfp4` gives each expert of a
// stack its own tensor scale (the F32 [experts] `.scale` llama.cpp's converter writes), the cpu
// binding reads them and the MoE layer multiplies each expert's products by its own scale (the
// shared expert's matrices by theirs). Checked against the same model with every NVFP4 tensor
// replaced by its values (blocks x scale) in F32, and shown to matter: with the expert scales
// set to 1 the logits are far off.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/gguf/dequantize.h"
#include "common/gguf/gguf_file.h"
#include "common/gguf/gguf_writer.h"
#include "tests/testing/teacher_forced_kl.h"
#include "tests/unique_temp_path.h"
#include "tools/convert/tiny_hybrid_model.h"
#include "tools/quantize/quantize_model.h"
#include "tools/quantize/quantize_plan.h"
#include "worker/loaded_model.h"

namespace tessera::worker {
namespace {

constexpr std::string_view kScaleSuffix = ".scale";

std::string ModuleOf(const std::string& weight_name) {
  return weight_name.substr(0, weight_name.size() - std::string_view(".weight").size());
}

// `file` rewritten by `edit(tensor, bytes) -> keep?` (metadata as is).
template <typename Edit>
void Rewrite(const gguf::GgufFile& file, const std::string& path, Edit edit) {
  gguf::GgufWriter writer(3, file.alignment());
  for (const gguf::GgufMetadataEntry& entry : file.metadata()) {
    if (entry.key != "general.alignment") writer.AddValue(entry.key, entry.value);
  }
  for (const gguf::GgufTensorInfo& t : file.tensors()) {
    gguf::GgmlType type = t.type;
    std::vector<uint8_t> bytes(file.TensorData(t).begin(), file.TensorData(t).end());
    if (edit(t, &type, &bytes)) writer.AddTensor(t.name, t.dims, type, bytes);
  }
  ASSERT_TRUE(writer.WriteToFile(path).ok());
}

std::vector<float> Floats(std::span<const uint8_t> bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

std::vector<std::vector<float>> Logits(const std::string& path, const std::vector<int32_t>& tokens) {
  auto model = LoadModel(path);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  return testing_util::TeacherForcedLogits(**model, {}, tokens);
}

double MaxAbs(const std::vector<std::vector<float>>& rows) {
  double out = 0;
  for (const auto& row : rows) {
    for (float v : row) out = std::max(out, double{std::fabs(v)});
  }
  return out;
}

double MaxDiff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  EXPECT_EQ(a.size(), b.size());
  double out = 0;
  for (size_t r = 0; r < std::min(a.size(), b.size()); ++r) {
    for (size_t i = 0; i < a[r].size(); ++i) out = std::max(out, double{std::fabs(a[r][i] - b[r][i])});
  }
  return out;
}

TEST(Nvfp4ExpertScalesTest, EachExpertIsScaledByItsOwnTensorScale) {
  convert::TinyHybridOptions options{.arch = convert::TinyHybridArch::kQwen35Moe};
  options.expert_ffn = 64;  // NVFP4 needs rows of whole 64-element blocks (down's rows)
  const std::string source = testing_util::UniqueTempPath("moe_f32.gguf");
  const std::string quantized = testing_util::UniqueTempPath("moe_nvfp4.gguf");
  const std::string reference = testing_util::UniqueTempPath("moe_values.gguf");
  const std::string unscaled = testing_util::UniqueTempPath("moe_unscaled.gguf");
  ASSERT_TRUE(convert::WriteTinyHybridGguf(options, source).ok());
  auto in = gguf::GgufFile::Open(source);
  ASSERT_TRUE(in.ok()) << in.status();
  auto plan = quantize::PlanQuantization(**in, {.target = gguf::GgmlType::kNvfp4});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(quantize::QuantizeModel(**in, *plan, quantized).ok());
  auto q = gguf::GgufFile::Open(quantized);
  ASSERT_TRUE(q.ok()) << q.status();

  // Every expert stack is NVFP4 with one scale per expert, and the experts' scales differ.
  int stacks = 0;
  for (const gguf::GgufTensorInfo& t : (*q)->tensors()) {
    if (t.name.find("_exps.weight") == std::string::npos) continue;
    ++stacks;
    EXPECT_EQ(t.type, gguf::GgmlType::kNvfp4) << t.name;
    const gguf::GgufTensorInfo* scale = (*q)->FindTensor(ModuleOf(t.name) + ".scale");
    ASSERT_NE(scale, nullptr) << t.name;
    ASSERT_EQ(scale->num_elements, static_cast<uint64_t>(options.num_experts));
    const std::vector<float> s = Floats((*q)->TensorData(*scale));
    EXPECT_NE(*std::min_element(s.begin(), s.end()), *std::max_element(s.begin(), s.end()));
  }
  EXPECT_EQ(stacks, 3 * options.num_layers);

  // The reference: each NVFP4 tensor as F32 values, blocks x its (per-expert) scale.
  Rewrite(**q, reference, [&](const gguf::GgufTensorInfo& t, gguf::GgmlType* type,
                              std::vector<uint8_t>* bytes) {
    if (t.name.ends_with(kScaleSuffix)) return false;
    if (t.type != gguf::GgmlType::kNvfp4) return true;
    std::vector<float> values = *gguf::DequantizeToF32(t.type, *bytes, t.num_elements);
    const gguf::GgufTensorInfo* scale = (*q)->FindTensor(ModuleOf(t.name) + ".scale");
    const std::vector<float> s = Floats((*q)->TensorData(*scale));
    for (size_t i = 0; i < values.size(); ++i) values[i] *= s[i * s.size() / values.size()];
    *type = gguf::GgmlType::kF32;
    bytes->resize(values.size() * sizeof(float));
    std::memcpy(bytes->data(), values.data(), bytes->size());
    return true;
  });
  // The expert stacks' scales all 1.
  Rewrite(**q, unscaled, [](const gguf::GgufTensorInfo& t, gguf::GgmlType*, std::vector<uint8_t>* bytes) {
    if (t.name.find("_exps.scale") == std::string::npos) return true;
    std::vector<float> ones(t.num_elements, 1.0f);
    std::memcpy(bytes->data(), ones.data(), bytes->size());
    return true;
  });

  const std::vector<int32_t> tokens = {5, 17, 42, 99, 7, 250, 31, 64, 12, 180, 3, 77};
  const auto from_blocks = Logits(quantized, tokens);
  const auto from_values = Logits(reference, tokens);
  const auto without_scales = Logits(unscaled, tokens);
  ASSERT_EQ(from_blocks.size(), tokens.size());
  const double spread = MaxAbs(from_values);
  const double diff = MaxDiff(from_blocks, from_values);
  const double off = MaxDiff(without_scales, from_values);
  std::printf("max |logit| %.3g, |blocks - values| %.3g, expert scales dropped %.3g\n", spread,
              diff, off);
  // The scale multiplies each product instead of each weight: f32 rounding apart, the same.
  EXPECT_LE(diff, 1e-4 * spread);
  EXPECT_GT(off, 0.1 * spread);
  for (const std::string& path : {source, quantized, reference, unscaled}) {
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace tessera::worker
