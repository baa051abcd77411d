// The GGUF twin: a tiny model written as GGUF (tools/convert/tiny_model.h) and the same weights
// written as a Hugging Face directory (tools/convert/hf_export.h: HF names and shapes, llama's
// Q/K rows un-permuted back to how HF stores them) give the same logits through the cpu runner.
// The directory is served without rewriting a weight: a llama's Q/K rotate in NeoX mode instead
// of being permuted, so for llama the two agree up to float summation order (attention dot
// products run over permuted head dimensions), and Qwen, stored as trained in both, bit for bit.
// Also: sharded directories, untied heads, NVFP4 (against the GGUF llama.cpp's converter makes of
// it: ggml NVFP4 blocks and `.scale` tensors, which the directory is read as, so Qwen's logits are
// bit-identical), and tensors not aligned to their element size in the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/gguf/gguf_file.h"
#include "common/safetensors/model_file.h"
#include "tests/unit/safetensors/safetensors_test_util.h"
#include "tools/convert/hf_export.h"
#include "tools/convert/nvfp4_encoder.h"
#include "tools/convert/tiny_model.h"
#include "worker/cpu/cpu_model_runner.h"
#include "worker/loaded_model.h"

namespace tessera::safetensors {
namespace {

using convert::TinyDenseArch;

constexpr int kNumTokens = 40;

struct Twin {
  std::string gguf;
  std::string dir;
};

struct Case {
  const char* label;
  convert::TinyModelOptions model;
  convert::HfExportOptions hf;
};

// Writes the tiny model as GGUF and as its HF twin. With NVFP4 the GGUF holds the directory's
// NVFP4 encoding as ggml's NVFP4 blocks with their tensor scales.
Twin WriteTwin(const Case& c) {
  Twin twin{testing_util::UniqueTempPath(std::string("twin_") + c.label + ".gguf"),
            testing::FreshDir(std::string("twin_") + c.label)};
  auto image = convert::BuildTinyLlamaGguf(c.model);
  EXPECT_TRUE(image.ok()) << image.status();
  auto file = gguf::GgufFile::FromBuffer(*std::move(image));
  EXPECT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(convert::ExportHfDirectory(**file, c.hf, twin.dir).ok());
  std::vector<uint8_t> bytes;
  if (c.hf.nvfp4) {
    auto snapped = convert::SnapLinearsToNvfp4(**file);
    EXPECT_TRUE(snapped.ok()) << snapped.status();
    bytes = *std::move(snapped);
  } else {
    bytes = convert::BuildTinyLlamaGguf(c.model).value();
  }
  testing::WriteBytes(twin.gguf, bytes);
  return twin;
}

// Last-token logits of a kNumTokens prompt.
std::vector<float> PromptLogits(const std::string& path, bool expect_neox) {
  auto model = worker::LoadModel(path);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  EXPECT_EQ((*model)->config.rope_neox, expect_neox) << path;
  kernels::cpu::ThreadPool pool(2);
  worker::CpuModelRunner runner((*model)->config, &(*model)->plan, (*model)->weights.get(), &pool,
                                {.block_size = 16, .num_kv_blocks = 4});
  std::vector<int32_t> tokens(kNumTokens);
  for (int i = 0; i < kNumTokens; ++i) tokens[i] = 3 + (i * 37) % 400;
  const std::vector<int32_t> blocks = {1, 2, 3};
  const worker::SequenceWork work{
      .tokens = tokens, .start_pos = 0, .block_table = blocks, .needs_logits = true};
  worker::StepLogits logits;
  EXPECT_TRUE(runner.Forward({&work, 1}, &logits).ok());
  return logits.values;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::abs(double{a[i]} - b[i]));
  }
  return worst;
}

// NVFP4 is read packed: every projection a ggml NVFP4 tensor with its `.scale`, nothing F32
// beyond the norms.
void ExpectPackedNvfp4Projections(const std::string& dir, int num_layers) {
  auto view = OpenModelFile(dir);
  ASSERT_TRUE(view.ok()) << view.status();
  int packed = 0;
  int scales = 0;
  for (const gguf::GgufTensorInfo& t : (*view)->tensors()) {
    if (t.type == gguf::GgmlType::kNvfp4) {
      EXPECT_TRUE(convert::IsNvfp4Linear(t.name)) << t.name;
      ++packed;
    }
    if (t.name.ends_with(".scale")) ++scales;
  }
  EXPECT_EQ(packed, 7 * num_layers);
  EXPECT_EQ(scales, 7 * num_layers);
}

class HfTwinLogitsTest : public ::testing::TestWithParam<Case> {};

TEST_P(HfTwinLogitsTest, TheDirectoryGivesTheGgufTwinsLogits) {
  const Case& c = GetParam();
  const Twin twin = WriteTwin(c);
  if (c.hf.nvfp4) ExpectPackedNvfp4Projections(twin.dir, c.model.num_layers);
  const bool llama = c.model.arch == TinyDenseArch::kLlama;
  const std::vector<float> from_gguf = PromptLogits(twin.gguf, !llama);
  const std::vector<float> from_hf = PromptLogits(twin.dir, true);
  ASSERT_FALSE(from_gguf.empty());
  double scale = 0.0;
  for (float v : from_gguf) scale = std::max(scale, double{std::abs(v)});
  const double diff = MaxAbsDiff(from_hf, from_gguf);
  std::printf("%s: max |logit| %.3g, |hf - gguf| %.3g\n", c.label, scale, diff);
  if (llama) {
    EXPECT_LE(diff, 1e-4 * scale);
  } else {
    EXPECT_EQ(from_hf, from_gguf);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, HfTwinLogitsTest,
    ::testing::Values(
        Case{"llama", {.arch = TinyDenseArch::kLlama, .seed = 3}, {}},
        Case{"llama_untied_2_shards",
             {.arch = TinyDenseArch::kLlama, .seed = 4, .tied_embeddings = false},
             {.num_shards = 2}},
        Case{"qwen2", {.arch = TinyDenseArch::kQwen2, .seed = 5}, {}},
        Case{"qwen3_untied_3_shards",
             {.arch = TinyDenseArch::kQwen3, .seed = 6, .tied_embeddings = false},
             {.num_shards = 3}},
        Case{"qwen3_nvfp4", {.arch = TinyDenseArch::kQwen3, .seed = 7}, {.nvfp4 = true}},
        Case{"llama_nvfp4_2_shards",
             {.arch = TinyDenseArch::kLlama, .seed = 8},
             {.num_shards = 2, .nvfp4 = true}}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.label); });

// Rewrites model.safetensors with its header two bytes longer (JSON whitespace), so that every
// tensor's data sits 2 bytes off its element alignment in the file.
void MisalignTheData(const std::string& dir) {
  const std::string path = dir + "/model.safetensors";
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  ASSERT_GE(bytes.size(), 8u);
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = length << 8 | bytes[i];
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + length);
  const std::vector<uint8_t> data(bytes.begin() + 8 + length, bytes.end());
  testing::WriteBytes(path, testing::Image(header + "  ", data));
}

TEST(HfTwinAlignmentTest, MisalignedTensorsAreReadFromAlignedCopies) {
  const Case c{"qwen2_misaligned", {.arch = TinyDenseArch::kQwen2, .seed = 9}, {}};
  const Twin twin = WriteTwin(c);
  MisalignTheData(twin.dir);
  auto view = OpenModelFile(twin.dir);
  ASSERT_TRUE(view.ok()) << view.status();
  for (const gguf::GgufTensorInfo& t : (*view)->tensors()) {
    const size_t element = t.type == gguf::GgmlType::kF32 ? 4 : 2;
    EXPECT_EQ(reinterpret_cast<uintptr_t>((*view)->TensorData(t).data()) % element, 0u) << t.name;
  }
  EXPECT_EQ(PromptLogits(twin.dir, true), PromptLogits(twin.gguf, true));
}

}  // namespace
}  // namespace tessera::safetensors
