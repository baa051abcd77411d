// tessera quantize's core (tools/quantize): the recipe's decision for every tensor of a tiny
// llama, the streamed conversion (kept tensors byte-identical, converted ones exactly what
// quantizing their dequantized values gives, metadata copied with the file type updated), and
// the progress line.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/gguf/dequantize.h"
#include "common/gguf/gguf_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/convert/tiny_model.h"
#include "tools/quantize/progress_bar.h"
#include "tools/quantize/quantize_model.h"
#include "tools/quantize/quantize_plan.h"

namespace tessera::quantize {
namespace {

using gguf::GgmlType;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/quantize_test_", getpid(), "_", name, ".gguf");
}

std::unique_ptr<gguf::GgufFile> TinyModel(const std::string& path) {
  convert::TinyModelOptions options;
  options.tied_embeddings = false;  // an output.weight to keep
  EXPECT_TRUE(convert::WriteTinyLlamaGguf(options, path).ok());
  auto file = gguf::GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  return std::move(*file);
}

std::map<std::string, TensorDecision> ByName(const std::vector<TensorDecision>& plan) {
  std::map<std::string, TensorDecision> out;
  for (const TensorDecision& d : plan) out[d.tensor->name] = d;
  return out;
}

TEST(QuantizePlanTest, QuantizesBlockMatricesAndKeepsEmbeddingsHeadAndNorms) {
  const std::string path = TempPath("plan");
  const auto file = TinyModel(path);
  auto plan = PlanQuantization(*file, {.target = GgmlType::kQ8_0});
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto d = ByName(*plan);
  EXPECT_EQ(d["blk.0.attn_q.weight"].action, TensorAction::kQuantize);  // Q4_1 -> Q8_0
  EXPECT_EQ(d["blk.0.ffn_up.weight"].action, TensorAction::kQuantize);  // F16 -> Q8_0
  EXPECT_EQ(d["blk.0.ffn_up.weight"].output_type, GgmlType::kQ8_0);
  EXPECT_EQ(d["blk.1.attn_q.weight"].action, TensorAction::kCopy);      // already Q8_0
  EXPECT_EQ(d["blk.1.attn_q.weight"].reason, "already the target type");
  EXPECT_EQ(d["blk.0.attn_norm.weight"].action, TensorAction::kCopy);
  EXPECT_EQ(d["token_embd.weight"].action, TensorAction::kCopy);
  EXPECT_THAT(d["token_embd.weight"].reason, HasSubstr("--quantize-embeddings"));
  EXPECT_EQ(d["output.weight"].action, TensorAction::kCopy);
  EXPECT_EQ(d["output_norm.weight"].action, TensorAction::kCopy);

  auto everything = PlanQuantization(
      *file, {.target = GgmlType::kQ8_0, .quantize_embeddings = true, .quantize_output = true});
  ASSERT_TRUE(everything.ok());
  EXPECT_EQ(ByName(*everything)["output.weight"].action, TensorAction::kQuantize);
  // token_embd is already Q8_0 in the tiny model.
  EXPECT_EQ(ByName(*everything)["token_embd.weight"].reason, "already the target type");
  std::filesystem::remove(path);
}

TEST(QuantizePlanTest, ParsesTargetsAndNamesTheAcceptedOnes) {
  EXPECT_EQ(*ParseQuantizeTarget("Q8_0"), GgmlType::kQ8_0);
  EXPECT_EQ(*ParseQuantizeTarget("NVFP4"), GgmlType::kNvfp4);
  EXPECT_THAT(ParseQuantizeTarget("q4_k").status().message(), HasSubstr("use nvfp4 or q8_0"));
}

TEST(QuantizeModelTest, ConvertsTheChosenTensorsAndCopiesTheRest) {
  const std::string in_path = TempPath("in"), out_path = TempPath("out");
  const auto in = TinyModel(in_path);
  auto plan = PlanQuantization(*in, {.target = GgmlType::kQ8_0});
  ASSERT_TRUE(plan.ok());
  size_t calls = 0;
  auto summary = QuantizeModel(*in, *plan, out_path, [&](const QuantizeProgress&) { ++calls; });
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(calls, plan->size() + 1);
  EXPECT_EQ(summary->quantized + summary->copied, static_cast<int>(plan->size()));
  auto out = gguf::GgufFile::Open(out_path);
  ASSERT_TRUE(out.ok()) << out.status();
  for (const TensorDecision& d : *plan) {
    const gguf::GgufTensorInfo* t = (*out)->FindTensor(d.tensor->name);
    ASSERT_NE(t, nullptr) << d.tensor->name;
    EXPECT_EQ(t->dims, d.tensor->dims);
    const auto got = (*out)->TensorData(*t);
    if (d.action == TensorAction::kCopy) {
      const auto want = in->TensorData(*d.tensor);
      EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end())) << t->name;
      continue;
    }
    ASSERT_EQ(t->type, GgmlType::kQ8_0);
    auto values = gguf::DequantizeToF32(d.tensor->type, in->TensorData(*d.tensor),
                                        d.tensor->num_elements);
    auto want = gguf::QuantizeFromF32(GgmlType::kQ8_0, *values);
    EXPECT_EQ(std::vector<uint8_t>(got.begin(), got.end()), *want) << t->name;
  }
  EXPECT_EQ(*(*out)->GetInt("general.file_type"), 7);
  EXPECT_EQ(*(*out)->GetString("general.quantized_by"), "tessera quantize");
  EXPECT_EQ(*(*out)->GetString("general.architecture"), "llama");
  std::filesystem::remove(in_path);
  std::filesystem::remove(out_path);
}

// NVFP4: each converted matrix is followed by its F32 [1] tensor scale (amax / (6 * 448)), and
// blocks x scale give back the values within E2M1's rounding; the embedding stays.
TEST(QuantizeModelTest, Nvfp4WritesEachMatrixWithItsTensorScale) {
  const std::string in_path = TempPath("in4"), out_path = TempPath("out4");
  const auto in = TinyModel(in_path);
  auto plan = PlanQuantization(*in, {.target = GgmlType::kNvfp4, .quantize_embeddings = true});
  ASSERT_TRUE(plan.ok());
  auto d = ByName(*plan);
  EXPECT_EQ(d["token_embd.weight"].action, TensorAction::kCopy);
  EXPECT_EQ(d["blk.0.attn_q.weight"].scale_name, "blk.0.attn_q.scale");
  ASSERT_TRUE(QuantizeModel(*in, *plan, out_path).ok());
  auto out = gguf::GgufFile::Open(out_path);
  ASSERT_TRUE(out.ok()) << out.status();
  for (const char* name : {"blk.0.attn_q", "blk.1.ffn_down"}) {
    const gguf::GgufTensorInfo* w = (*out)->FindTensor(std::string(name) + ".weight");
    const gguf::GgufTensorInfo* s = (*out)->FindTensor(std::string(name) + ".scale");
    ASSERT_NE(w, nullptr);
    ASSERT_NE(s, nullptr) << name;
    ASSERT_EQ(w->type, GgmlType::kNvfp4);
    ASSERT_EQ(s->type, GgmlType::kF32);
    const float scale = *reinterpret_cast<const float*>((*out)->TensorData(*s).data());
    auto original = *gguf::DequantizeToF32(d[w->name].tensor->type,
                                           in->TensorData(*d[w->name].tensor), w->num_elements);
    float amax = 0;
    for (float v : original) amax = std::max(amax, std::fabs(v));
    EXPECT_EQ(scale, amax / (6.0f * 448.0f)) << name;
    auto blocks = *gguf::DequantizeToF32(GgmlType::kNvfp4, (*out)->TensorData(*w), w->num_elements);
    double err = 0, norm = 0;
    for (size_t i = 0; i < original.size(); ++i) {
      err += std::pow(blocks[i] * scale - original[i], 2);
      norm += std::pow(original[i], 2);
    }
    EXPECT_LT(std::sqrt(err / norm), 0.15) << name;  // E2M1 with E4M3 block scales: ~8-12%
    EXPECT_GT(std::sqrt(err / norm), 0.0) << name;
  }
  std::filesystem::remove(in_path);
  std::filesystem::remove(out_path);
}

TEST(ProgressBarTest, ShowsPercentBarCountsAndTheTensorInHand) {
  const QuantizeProgress p{.tensors_done = 3, .tensors_total = 12, .bytes_done = 50,
                           .bytes_total = 200, .current = "blk.1.ffn_up.weight"};
  EXPECT_EQ(FormatProgressLine(p, 8), " 25% [##      ] 3/12 blk.1.ffn_up.weight");
  const QuantizeProgress done{.tensors_done = 12, .tensors_total = 12, .bytes_done = 200,
                              .bytes_total = 200, .current = ""};
  EXPECT_EQ(FormatProgressLine(done, 4), "100% [####] 12/12 ");
}

}  // namespace
}  // namespace tessera::quantize
