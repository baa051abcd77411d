// The generated hybrid Gated-DeltaNet models (tools/convert/tiny_hybrid_model.h), for each of
// qwen35, qwen35moe and qwen3next: the file reads back through the real config reader and tensor
// checker with the options it was made from (layer kinds, GDN widths, value-head order,
// experts, rope sections), worker::LoadModel loads it and the cpu runner runs it, the values are finite
// at the documented scales, the matrix storage options hold, and the bytes depend on the
// options and the seed only.
#include "tools/convert/tiny_hybrid_model.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/gguf/dequantize.h"
#include "common/gguf/gguf_file.h"
#include "common/model/hybrid_config.h"
#include "common/model/hybrid_tensors.h"
#include "common/model/model_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/cpu/cpu_model_runner.h"
#include "worker/loaded_model.h"

namespace tessera::convert {
namespace {

using gguf::GgmlType;
using model::GdnHeadOrder;
using model::LayerKind;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr LayerKind kGdn = LayerKind::kGatedDeltaNet;
constexpr LayerKind kAttn = LayerKind::kAttention;

std::string TempPath(const std::string& name) {
  return absl::StrCat(testing::TempDir(), "/tiny_hybrid_model_test_", getpid(), "_", name, ".gguf");
}

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Every width differs from the defaults and from each other where it can, so a field read
// from the wrong key shows.
TinyHybridOptions Unusual(TinyHybridArch arch) {
  TinyHybridOptions o;
  o.arch = arch;
  o.num_layers = 6;
  o.full_attention_interval = 3;
  o.hidden = 96;
  o.num_heads = 6;
  o.num_kv_heads = 2;
  o.head_dim = 20;
  o.rope_dim = 6;
  o.gdn_k_heads = 2;
  o.gdn_v_heads = 6;
  o.gdn_head_dim = 12;
  o.conv_kernel = 3;
  o.ffn = 80;
  o.num_experts = 5;
  o.num_experts_used = 3;
  o.expert_ffn = 24;
  o.shared_expert_ffn = 40;
  o.context_length = 512;
  o.num_merges = 50;
  o.seed = 11;
  o.tied_embeddings = false;
  return o;
}

// Writes the model, reads it back with the real reader; the mapping outlives the unlink.
std::unique_ptr<gguf::GgufFile> WriteAndOpen(const TinyHybridOptions& options,
                                             const std::string& name) {
  const std::string path = TempPath(name);
  absl::Status written = WriteTinyHybridGguf(options, path);
  EXPECT_TRUE(written.ok()) << written;
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  std::filesystem::remove(path);
  return file.ok() ? *std::move(file) : nullptr;
}

class TinyHybridModelTest : public testing::TestWithParam<TinyHybridArch> {
 protected:
  TinyHybridArch arch() const { return GetParam(); }
  std::string arch_name() const { return std::string(TinyHybridArchName(GetParam())); }
};

TEST_P(TinyHybridModelTest, ConfigReadsBackTheOptions) {
  const TinyHybridOptions o = Unusual(arch());
  std::unique_ptr<gguf::GgufFile> f = WriteAndOpen(o, "config");
  ASSERT_NE(f, nullptr);
  absl::StatusOr<model::ModelConfig> c = model::ReadModelConfig(*f);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, arch_name());
  EXPECT_EQ(c->num_layers, 6);
  EXPECT_EQ(c->hidden_size, 96);
  EXPECT_EQ(c->num_heads, 6);
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->head_dim, 20);
  EXPECT_EQ(c->rope_dim, 6);
  EXPECT_EQ(c->context_length, 512);
  EXPECT_EQ(static_cast<size_t>(c->vocab_size), f->GetStringArray("tokenizer.ggml.tokens")->size());
  EXPECT_FLOAT_EQ(static_cast<float>(c->rms_norm_eps), 1e-6f);
  EXPECT_FALSE(c->tied_embeddings);
  EXPECT_EQ(c->ffn_size, arch() == TinyHybridArch::kQwen35Moe ? 0 : 80);

  ASSERT_TRUE(c->hybrid.has_value());
  const model::HybridLayout& h = *c->hybrid;
  EXPECT_THAT(h.layer_kinds, ElementsAre(kGdn, kGdn, kAttn, kGdn, kGdn, kAttn));
  EXPECT_EQ(h.full_attention_interval, 3);
  EXPECT_EQ(h.gdn.conv_kernel, 3);
  EXPECT_EQ(h.gdn.num_k_heads, 2);
  EXPECT_EQ(h.gdn.num_v_heads, 6);
  EXPECT_EQ(h.gdn.head_k_dim, 12);
  EXPECT_EQ(h.gdn.head_v_dim, 12);
  EXPECT_EQ(h.gdn.head_order,
            arch() == TinyHybridArch::kQwen3Next ? GdnHeadOrder::kGrouped : GdnHeadOrder::kTiled);
  if (arch() == TinyHybridArch::kQwen3Next) {
    EXPECT_THAT(h.rope_sections, ElementsAre(0, 0, 0, 0));
  } else {
    EXPECT_THAT(h.rope_sections, ElementsAre(1, 1, 1, 0));
  }
  if (TinyHybridArchHasExperts(arch())) {
    ASSERT_TRUE(h.moe.has_value());
    EXPECT_EQ(h.moe->num_experts, 5);
    EXPECT_EQ(h.moe->num_experts_used, 3);
    EXPECT_EQ(h.moe->expert_ffn_size, 24);
    EXPECT_EQ(h.moe->shared_expert_ffn_size, 40);
  } else {
    EXPECT_FALSE(h.moe.has_value());
  }
}

TEST_P(TinyHybridModelTest, EveryTensorPassesTheCheckerAndNoneIsExtra) {
  std::unique_ptr<gguf::GgufFile> f = WriteAndOpen(Unusual(arch()), "tensors");
  ASSERT_NE(f, nullptr);
  absl::StatusOr<model::ModelConfig> c = model::ReadModelConfig(*f);
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<model::HybridTensorForms> forms = model::CheckHybridTensors(*f, *c);
  ASSERT_TRUE(forms.ok()) << forms.status();
  EXPECT_FALSE(forms->gdn_fused_qkvz);
  EXPECT_FALSE(forms->moe_fused_gate_up);
  size_t expected = 3;  // token_embd, output_norm, output (untied)
  for (int layer = 0; layer < c->num_layers; ++layer) {
    expected += model::ExpectedLayerTensors(*c, layer, *forms).size();
  }
  EXPECT_EQ(f->tensors().size(), expected);
}

// The file loads (every declared weight bound) and the cpu runner computes finite logits for a
// 20-token prompt followed by 4 decode steps.
TEST_P(TinyHybridModelTest, LoadsAndRunsOnTheCpuRunner) {
  const std::string path = TempPath("load");
  ASSERT_TRUE(WriteTinyHybridGguf(TinyHybridOptions{.arch = arch()}, path).ok());
  absl::StatusOr<std::unique_ptr<worker::LoadedModel>> loaded = worker::LoadModel(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const worker::LoadedModel& model = **loaded;
  EXPECT_EQ(model.config.architecture, arch_name());
  EXPECT_GT(model.plan.num_linear_layers, 0);
  kernels::cpu::ThreadPool pool(2);
  worker::CpuModelRunner runner(model.config, &model.plan, model.weights.get(), &pool,
                                worker::CpuRunnerOptions{.block_size = 16, .num_kv_blocks = 4,
                                                         .max_num_seqs = 1});
  std::vector<int32_t> tokens(20);
  for (int i = 0; i < 20; ++i) tokens[i] = 3 + (i * 37) % 200;
  const std::vector<int32_t> table = {1, 2, 3};
  sampling::SamplingParams greedy;
  greedy.temperature = 0.0f;
  runner.BeginSequence(0, greedy, tokens, {});
  for (int step = 0; step < 5; ++step) {
    const size_t start = step == 0 ? 0 : tokens.size() - 1;
    const worker::SequenceWork work{
        .tokens = std::span<const int32_t>(tokens).subspan(start),
        .start_pos = static_cast<int32_t>(start), .block_table = table, .needs_logits = true,
        .slot = 0};
    worker::StepLogits logits;
    ASSERT_TRUE(runner.Forward({&work, 1}, &logits).ok());
    for (float v : logits.values) ASSERT_TRUE(std::isfinite(v)) << "step " << step;
    worker::StepSamples samples;
    ASSERT_TRUE(runner.Step({&work, 1}, &samples).ok());
    tokens.push_back(samples.rows.at(0).token);
  }
}

// Mean and standard deviation of a tensor's values (dequantized), all of them finite.
struct Moments {
  double mean = 0, stddev = 0, min = 1e30, max = -1e30;
};
Moments Measure(const gguf::GgufFile& f, const gguf::GgufTensorInfo& t) {
  absl::StatusOr<std::vector<float>> values =
      gguf::DequantizeToF32(t.type, f.TensorData(t), t.num_elements);
  EXPECT_TRUE(values.ok()) << t.name << ": " << values.status();
  Moments m;
  if (!values.ok()) return m;
  double sum = 0, sum_sq = 0;
  for (float v : *values) {
    EXPECT_TRUE(std::isfinite(v)) << t.name;
    sum += v;
    sum_sq += static_cast<double>(v) * v;
    m.min = std::min<double>(m.min, v);
    m.max = std::max<double>(m.max, v);
  }
  m.mean = sum / values->size();
  m.stddev = std::sqrt(std::max(0.0, sum_sq / values->size() - m.mean * m.mean));
  return m;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

TEST_P(TinyHybridModelTest, ValuesAreFiniteAtTheDocumentedScales) {
  std::unique_ptr<gguf::GgufFile> f = WriteAndOpen(Unusual(arch()), "values");
  ASSERT_NE(f, nullptr);
  for (const gguf::GgufTensorInfo& t : f->tensors()) {
    const Moments m = Measure(*f, t);
    if (EndsWith(t.name, "norm.weight")) {  // +1 folded in (ssm_norm: stored as is) -> ~1
      EXPECT_NEAR(m.mean, 1.0, 0.02) << t.name;
    } else if (EndsWith(t.name, "ssm_a")) {  // -exp(U(0, 2))
      EXPECT_GE(m.min, -std::exp(2.0)) << t.name;
      EXPECT_LE(m.max, -1.0) << t.name;
    } else if (EndsWith(t.name, "ssm_dt.bias")) {
      EXPECT_GE(m.min, -4.0) << t.name;
      EXPECT_LT(m.max, 0.0) << t.name;
    } else if (EndsWith(t.name, "ssm_conv1d.weight")) {
      EXPECT_NEAR(m.stddev, 0.3, 0.05) << t.name;
    } else if (t.num_elements >= 256) {  // matrices ~ N(0, 0.02)
      EXPECT_NEAR(m.mean, 0.0, 0.005) << t.name;
      EXPECT_NEAR(m.stddev, 0.02, 0.004) << t.name;
    }
    EXPECT_EQ(t.type, GgmlType::kF32) << t.name;  // the default storage
  }
}

TEST_P(TinyHybridModelTest, SameOptionsSameBytesOtherSeedOtherBytes) {
  TinyHybridOptions options = Unusual(arch());
  absl::StatusOr<std::vector<uint8_t>> a = BuildTinyHybridGguf(options);
  absl::StatusOr<std::vector<uint8_t>> b = BuildTinyHybridGguf(options);
  const std::string path = TempPath("det");
  ASSERT_TRUE(WriteTinyHybridGguf(options, path).ok());
  const std::vector<uint8_t> written = ReadBytes(path);
  std::filesystem::remove(path);
  options.seed = 12;
  absl::StatusOr<std::vector<uint8_t>> c = BuildTinyHybridGguf(options);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(*a, written);
  EXPECT_EQ(a->size(), c->size());
  EXPECT_NE(*a, *c);
}

INSTANTIATE_TEST_SUITE_P(Archs, TinyHybridModelTest,
                         testing::Values(TinyHybridArch::kQwen35, TinyHybridArch::kQwen35Moe,
                                         TinyHybridArch::kQwen3Next),
                         [](const testing::TestParamInfo<TinyHybridArch>& info) {
                           return std::string(TinyHybridArchName(info.param));
                         });

TEST(TinyHybridModelTypesTest, QuantizedTypesOnlyWhereRowsAreWholeBlocks) {
  TinyHybridOptions o = Unusual(TinyHybridArch::kQwen35Moe);  // expert_ffn 24: not whole blocks
  o.weight_type = TinyWeightType::kQ8_0;
  std::unique_ptr<gguf::GgufFile> f = WriteAndOpen(o, "q8");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->FindTensor("token_embd.weight")->type, GgmlType::kQ8_0);
  EXPECT_EQ(f->FindTensor("blk.0.attn_qkv.weight")->type, GgmlType::kQ8_0);
  EXPECT_EQ(f->FindTensor("blk.0.ffn_gate_exps.weight")->type, GgmlType::kQ8_0);
  EXPECT_EQ(f->FindTensor("blk.0.ffn_down_exps.weight")->type, GgmlType::kF32);  // row 24
  EXPECT_EQ(f->FindTensor("blk.0.ssm_conv1d.weight")->type, GgmlType::kF32);
  EXPECT_EQ(f->FindTensor("blk.0.ssm_a")->type, GgmlType::kF32);
  EXPECT_EQ(f->FindTensor("blk.2.attn_q_norm.weight")->type, GgmlType::kF32);
  absl::StatusOr<model::ModelConfig> c = model::ReadModelConfig(*f);
  ASSERT_TRUE(c.ok()) << c.status();
  const absl::Status checked = model::CheckHybridTensors(*f, *c).status();
  EXPECT_TRUE(checked.ok()) << checked;
}

TEST(TinyHybridModelTypesTest, MixedStorageHasEveryTypeAndStillDequantizesFinite) {
  TinyHybridOptions o;
  o.arch = TinyHybridArch::kQwen3Next;
  o.weight_type = TinyWeightType::kMixed;
  o.tied_embeddings = false;
  std::unique_ptr<gguf::GgufFile> f = WriteAndOpen(o, "mixed");
  ASSERT_NE(f, nullptr);
  std::set<GgmlType> types;
  for (const gguf::GgufTensorInfo& t : f->tensors()) {
    types.insert(t.type);
    Measure(*f, t);
  }
  EXPECT_EQ(types,
            (std::set<GgmlType>{GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ4_1}));
  EXPECT_EQ(f->FindTensor("blk.0.attn_qkv.weight")->type, GgmlType::kQ4_1);
  EXPECT_EQ(f->FindTensor("blk.1.attn_qkv.weight")->type, GgmlType::kQ8_0);
  EXPECT_EQ(f->FindTensor("blk.0.ffn_up_exps.weight")->type, GgmlType::kF16);
  EXPECT_EQ(f->FindTensor("output.weight")->type, GgmlType::kF16);
  absl::StatusOr<model::ModelConfig> c = model::ReadModelConfig(*f);
  ASSERT_TRUE(c.ok()) << c.status();
  const absl::Status checked = model::CheckHybridTensors(*f, *c).status();
  EXPECT_TRUE(checked.ok()) << checked;
}

TEST(TinyHybridModelOptionsTest, RopeSectionsDealThePairsOverThreeAxes) {
  EXPECT_THAT(TinyRopeSections(8), ElementsAre(2, 1, 1, 0));
  EXPECT_THAT(TinyRopeSections(64), ElementsAre(11, 11, 10, 0));  // Qwen3.5's
  EXPECT_THAT(TinyRopeSections(2), ElementsAre(1, 0, 0, 0));
}

TEST(TinyHybridModelOptionsTest, InvalidOptionsNameTheFieldAndFlag) {
  auto expect_bad = [](const TinyHybridOptions& o, const std::string& text) {
    absl::Status s = ValidateTinyHybridOptions(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(s.message(), HasSubstr(text));
    EXPECT_EQ(BuildTinyHybridGguf(o).status().code(), absl::StatusCode::kInvalidArgument);
  };
  const TinyHybridOptions moe{.arch = TinyHybridArch::kQwen35Moe};
  TinyHybridOptions o;
  o.gdn_v_heads = 3;
  expect_bad(o, "gdn_v_heads (--gdn-v-heads) = 3 must be a multiple of gdn_k_heads (2)");
  o = {};
  o.hidden = 48;
  expect_bad(o, "hidden (--hidden) = 48");
  o = {};
  o.rope_dim = 40;
  expect_bad(o, "rope_dim (--rope-dim) = 40 must be in [2, 32]");
  o = {};
  o.rope_dim = 5;
  expect_bad(o, "rope_dim (--rope-dim) = 5 must be even");
  o = {};
  o.num_kv_heads = 3;
  expect_bad(o, "num_heads (--heads) = 4 must be a multiple of num_kv_heads (3)");
  o = {};
  o.full_attention_interval = 0;
  expect_bad(o, "full_attention_interval (--attention-interval) = 0");
  o = {};
  o.conv_kernel = 0;
  expect_bad(o, "conv_kernel (--conv-kernel) = 0");
  o = moe;
  o.num_experts_used = 9;
  expect_bad(o, "num_experts_used (--experts-used) = 9 must be in [1, 8]");
  o = moe;
  o.hidden = 65536;
  o.num_experts = 4096;
  expect_bad(o, "weights in all, more than the cap");
  // Fields an architecture does not read are not checked for it.
  o = {};
  o.num_experts = 0;
  EXPECT_TRUE(ValidateTinyHybridOptions(o).ok());
  o = moe;
  o.ffn = 0;
  EXPECT_TRUE(ValidateTinyHybridOptions(o).ok());
}

}  // namespace
}  // namespace tessera::convert
