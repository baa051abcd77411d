// RoPE pairing mode end to end in the CPU runner: the architecture in the GGUF picks normal or
// NeoX mode, and the two agree exactly where llama.cpp's converter says they must.
//
// convert_hf_to_gguf stores Qwen's Q/K weights as trained (llama.cpp rotates them in NeoX mode,
// pairs (i, i + rope_dim/2)) but permutes llama's so that each head's two halves are interleaved
// (llama.cpp rotates those in normal mode, adjacent pairs). So one set of trained weights written
// both ways — as `qwen2`/`qwen3` unchanged, and as `llama` with the Q/K rows (and Q/K biases and
// qk-norm weights) permuted like the converter does — must give the same logits. Running the
// unpermuted weights as `llama` (normal mode: what the runner did for Qwen before NeoX support)
// must not: the test checks that too, so the property cannot pass with the wrong mode.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/gguf/gguf_file.h"
#include "common/gguf/gguf_writer.h"
#include "tests/unique_temp_path.h"
#include "tools/convert/tiny_model.h"
#include "worker/cpu/cpu_model_runner.h"
#include "worker/loaded_model.h"
#include "worker/models/rope_params.h"

namespace tessera::worker {
namespace {

namespace cpu = kernels::cpu;

constexpr int kHeadDim = 16;  // tiny model: hidden 64 / 4 heads (2 KV heads)
constexpr int kNumTokens = 60;

// What a variant adds on top of the tiny model's tensors.
struct Extras {
  int rope_dim = kHeadDim;
  float bias_scale = 0.0f;      // > 0: random Q/K biases in [-scale, scale] (Qwen2 has them)
  float qk_norm_max = 0.0f;     // > 0: random qk-norm weights in [1, max] (Qwen3 has them)
};

// For a head of head_dim rows: the trained (NeoX-layout) row that lands at each row of the
// llama (normal-layout) file. convert_hf_to_gguf's permute reshapes each head's rows to
// [2, head_dim / 2] and transposes, so llama row 2i + j holds trained row j * head_dim / 2 + i;
// with partial rotation only the rotated rows [0, rope_dim) take part and the tail stays put.
std::vector<int> LlamaRowSources(int rope_dim) {
  std::vector<int> source(kHeadDim);
  for (int r = 0; r < kHeadDim; ++r) source[r] = r;
  for (int i = 0; i < rope_dim / 2; ++i) {
    for (int j = 0; j < 2; ++j) source[2 * i + j] = j * (rope_dim / 2) + i;
  }
  return source;
}

// Rows of `bytes` (num_rows equal rows, any GGUF type: quantized blocks never cross a row)
// reordered per head: out row h * head_dim + r = in row h * head_dim + source[r].
std::vector<uint8_t> PermuteHeadRows(std::span<const uint8_t> bytes, uint64_t num_rows,
                                     const std::vector<int>& source) {
  const size_t row_bytes = bytes.size() / num_rows;
  std::vector<uint8_t> out(bytes.size());
  for (uint64_t row = 0; row < num_rows; ++row) {
    const uint64_t head_base = row - row % kHeadDim;
    const uint64_t from = head_base + source[row % kHeadDim];
    std::memcpy(out.data() + row * row_bytes, bytes.data() + from * row_bytes, row_bytes);
  }
  return out;
}

std::vector<uint8_t> RandomF32Bytes(size_t n, float lo, float hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  std::vector<uint8_t> bytes(n * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

bool IsRotatedTensor(const std::string& name) {
  for (const char* suffix : {"attn_q.weight", "attn_k.weight", "attn_q.bias", "attn_k.bias",
                             "attn_q_norm.weight", "attn_k_norm.weight"}) {
    if (name.ends_with(suffix)) return true;
  }
  return false;
}

// The same trained weights (the tiny model's, plus `extras`) as a GGUF of `arch`; with
// `llama_layout` the rotated tensors are permuted as convert_hf_to_gguf does for llama. Returns
// the file's path (named after `tag` and the variant, so parallel test processes do not collide).
std::string WriteVariant(const std::string& tag, const std::string& arch, bool llama_layout,
                         const Extras& extras) {
  auto bytes = convert::BuildTinyLlamaGguf({.num_layers = 2, .seed = 11});
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  auto base = gguf::GgufFile::FromBuffer(std::move(*bytes));
  EXPECT_TRUE(base.ok()) << base.status();
  gguf::GgufWriter writer(3, (*base)->alignment());
  for (const gguf::GgufMetadataEntry& entry : (*base)->metadata()) {
    if (entry.key == "general.alignment" || entry.key == "llama.rope.dimension_count") continue;
    if (entry.key == "general.architecture") {
      writer.AddString(entry.key, arch);
    } else if (entry.key.starts_with("llama.")) {
      writer.AddValue(arch + entry.key.substr(5), entry.value);
    } else {
      writer.AddValue(entry.key, entry.value);
    }
  }
  writer.AddUint32(arch + ".rope.dimension_count", extras.rope_dim);
  const std::vector<int> source = LlamaRowSources(extras.rope_dim);
  const auto add = [&](const std::string& name, std::vector<uint64_t> dims, gguf::GgmlType type,
                       std::span<const uint8_t> data) {
    const uint64_t rows = dims.size() == 1 ? dims[0] : dims[1];  // ggml order: dims[1] = rows
    if (llama_layout && IsRotatedTensor(name)) {
      writer.AddTensor(name, dims, type, PermuteHeadRows(data, rows, source));
    } else {
      writer.AddTensor(name, dims, type, data);
    }
  };
  for (const gguf::GgufTensorInfo& t : (*base)->tensors()) {
    add(t.name, t.dims, t.type, (*base)->TensorData(t));
  }
  for (int layer = 0; layer < 2; ++layer) {
    const std::string p = "blk." + std::to_string(layer) + ".";
    for (const auto& [name, size] : {std::pair{"attn_q", 64}, std::pair{"attn_k", 32}}) {
      if (extras.bias_scale > 0.0f) {
        add(p + name + ".bias", {static_cast<uint64_t>(size)}, gguf::GgmlType::kF32,
            RandomF32Bytes(size, -extras.bias_scale, extras.bias_scale, 100 + layer + size));
      }
      if (extras.qk_norm_max > 0.0f) {
        add(p + name + "_norm.weight", {kHeadDim}, gguf::GgmlType::kF32,
            RandomF32Bytes(kHeadDim, 1.0f, extras.qk_norm_max, 200 + layer + size));
      }
    }
  }
  const std::string path =
      testing_util::UniqueTempPath("rope_mode_" + tag + "_" + arch +
                                   (llama_layout ? "_llama_layout" : "_trained") + ".gguf");
  EXPECT_TRUE(writer.WriteToFile(path).ok());
  return path;
}

// Last-token logits of a kNumTokens prompt; the architecture decides the mode.
std::vector<float> PromptLogits(const std::string& path, const std::string& expected_arch) {
  auto model = LoadModel(path);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  EXPECT_EQ((*model)->config.architecture, expected_arch);
  cpu::ThreadPool pool(2);
  CpuModelRunner runner((*model)->config, &(*model)->plan, (*model)->weights.get(), &pool,
                        {.block_size = 16, .num_kv_blocks = 8});
  EXPECT_EQ(runner.rope_table().mode(),
            expected_arch == "llama" ? cpu::RopeMode::kNormal : cpu::RopeMode::kNeox);
  std::vector<int32_t> tokens(kNumTokens);
  for (int i = 0; i < kNumTokens; ++i) tokens[i] = 3 + (i * 37) % 200;
  const std::vector<int32_t> blocks = {1, 2, 3, 4};
  const SequenceWork work{.tokens = tokens, .start_pos = 0, .block_table = blocks,
                          .needs_logits = true};
  StepLogits logits;
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

struct Case {
  const char* arch;
  Extras extras;
};

std::string CaseName(const Case& c) {
  return std::string(c.arch) + "_rope" + std::to_string(c.extras.rope_dim);
}

void PrintTo(const Case& c, std::ostream* os) { *os << CaseName(c); }

class RopeModeRunnerTest : public ::testing::TestWithParam<Case> {};

// Same trained weights: `qwen*` as stored (NeoX) == `llama` with converter-permuted rows (normal)
// up to float summation order (attention dot products and qk-norm run over permuted head
// dimensions); `llama` on the unpermuted rows (normal mode on NeoX weights) is far off.
TEST_P(RopeModeRunnerTest, QwenAsTrainedEqualsLlamaAsConverted) {
  const Case& c = GetParam();
  const std::string tag = CaseName(c);
  const std::vector<float> qwen = PromptLogits(WriteVariant(tag, c.arch, false, c.extras), c.arch);
  const std::vector<float> llama =
      PromptLogits(WriteVariant(tag, "llama", true, c.extras), "llama");
  const std::vector<float> wrong =
      PromptLogits(WriteVariant(tag, "llama", false, c.extras), "llama");
  const double same = MaxAbsDiff(qwen, llama);
  const double mode_error = MaxAbsDiff(wrong, llama);
  double scale = 0.0;
  for (float v : llama) scale = std::max(scale, double{std::abs(v)});
  std::printf("%s rope_dim %d: max |logit| %.3g, |neox - converted| %.3g, "
              "|normal-on-trained - converted| %.3g\n",
              c.arch, c.extras.rope_dim, scale, same, mode_error);
  EXPECT_LE(same, 1e-4 * scale);
  EXPECT_GE(mode_error, 100 * std::max(same, 1e-4 * scale));
}

INSTANTIATE_TEST_SUITE_P(
    Architectures, RopeModeRunnerTest,
    ::testing::Values(Case{"qwen2", {.rope_dim = 16, .bias_scale = 1.5f}},
                      Case{"qwen2", {.rope_dim = 8, .bias_scale = 1.5f}},
                      Case{"qwen3", {.rope_dim = 16, .qk_norm_max = 3.0f}},
                      Case{"qwen3", {.rope_dim = 10, .qk_norm_max = 3.0f}}),
    [](const ::testing::TestParamInfo<Case>& info) { return CaseName(info.param); });

TEST(RopeModeTest, RopeParamsForModelTakesTheModeFromTheConfig) {
  model::ModelConfig config;
  config.rope_dim = 16;
  config.context_length = 64;
  EXPECT_EQ(RopeParamsForModel(config, {}).mode, cpu::RopeMode::kNormal);
  config.rope_neox = true;
  EXPECT_EQ(RopeParamsForModel(config, {}).mode, cpu::RopeMode::kNeox);
}

}  // namespace
}  // namespace tessera::worker
