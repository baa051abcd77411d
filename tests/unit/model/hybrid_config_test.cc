// The hybrid Gated-DeltaNet hyper-parameters (qwen3next, qwen35, qwen35moe) as ReadModelConfig
// reads them from llama.cpp-named metadata, and each one-line error for a file that does not fit.
#include "common/model/hybrid_config.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/model/model_config.h"
#include "tests/testing/tiny_hybrid_gguf.h"

namespace tessera::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::TinyHybridGguf;

constexpr LayerKind kA = LayerKind::kAttention;
constexpr LayerKind kG = LayerKind::kGatedDeltaNet;

absl::StatusOr<ModelConfig> Read(const TinyHybridGguf& fixture) {
  auto file = fixture.Parse();
  if (!file.ok()) return file.status();
  return ReadModelConfig(**file);
}

// The error for `fixture`, which must be a one-line INVALID_ARGUMENT.
std::string ErrorOf(const TinyHybridGguf& fixture) {
  absl::StatusOr<ModelConfig> config = Read(fixture);
  EXPECT_FALSE(config.ok());
  if (config.ok()) return "";
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), Not(HasSubstr("\n")));
  return std::string(config.status().message());
}

class HybridArchitectures : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(All, HybridArchitectures,
                         ::testing::Values("qwen3next", "qwen35", "qwen35moe"));

TEST_P(HybridArchitectures, ReadsLayoutAndWidths) {
  TinyHybridGguf fixture(GetParam());
  auto config = Read(fixture);
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->hybrid.has_value());
  const HybridLayout& h = *config->hybrid;
  EXPECT_EQ(config->num_layers, 8);
  EXPECT_THAT(h.layer_kinds, ElementsAre(kG, kG, kG, kA, kG, kG, kG, kA));
  EXPECT_EQ(h.full_attention_interval, 4);
  EXPECT_EQ(h.num_nextn_layers, 0);
  // The gated attention layers: partial NeoX rope over 8 of 16 dims.
  EXPECT_EQ(config->num_heads, 4);
  EXPECT_EQ(config->num_kv_heads, 2);
  EXPECT_EQ(config->head_dim, 16);
  EXPECT_EQ(config->rope_dim, 8);
  EXPECT_TRUE(config->rope_neox);
  EXPECT_NEAR(config->rms_norm_eps, 1e-6, 1e-12);
  EXPECT_EQ(h.gdn.conv_kernel, 4);
  EXPECT_EQ(h.gdn.num_k_heads, 2);
  EXPECT_EQ(h.gdn.num_v_heads, 4);
  EXPECT_EQ(h.gdn.head_k_dim, 8);
  EXPECT_EQ(h.gdn.head_v_dim, 8);
  EXPECT_EQ(GdnKeyDim(h.gdn), 16);
  EXPECT_EQ(GdnValueDim(h.gdn), 32);
  EXPECT_EQ(GdnConvChannels(h.gdn), 64);
}

TEST_P(HybridArchitectures, PerSequenceStateIsConvPlusDeltaRuleStateOfEachGdnLayer) {
  auto config = Read(TinyHybridGguf(GetParam()));
  ASSERT_TRUE(config.ok()) << config.status();
  const RecurrentStateBytes bytes = PerSequenceStateBytes(*config->hybrid);
  EXPECT_EQ(bytes.conv, 6 * (3 * 64 * 4));    // 6 GDN layers x (kernel - 1) x channels x f32
  EXPECT_EQ(bytes.ssm, 6 * (4 * 8 * 8 * 4));  // 6 x [v heads, d_k, d_v] x f32
  EXPECT_EQ(bytes.total, bytes.conv + bytes.ssm);
}

TEST(HybridConfig, VariantsDifferInHeadOrderExpertsAndRopeSections) {
  auto next = Read(TinyHybridGguf("qwen3next"));
  auto dense = Read(TinyHybridGguf("qwen35"));
  auto moe = Read(TinyHybridGguf("qwen35moe"));
  ASSERT_TRUE(next.ok() && dense.ok() && moe.ok());
  EXPECT_EQ(next->hybrid->gdn.head_order, GdnHeadOrder::kGrouped);
  EXPECT_EQ(dense->hybrid->gdn.head_order, GdnHeadOrder::kTiled);
  EXPECT_EQ(moe->hybrid->gdn.head_order, GdnHeadOrder::kTiled);
  EXPECT_FALSE(dense->hybrid->moe.has_value());
  EXPECT_EQ(dense->ffn_size, 48);
  ASSERT_TRUE(next->hybrid->moe.has_value());
  ASSERT_TRUE(moe->hybrid->moe.has_value());
  EXPECT_EQ(moe->ffn_size, 0);  // no feed_forward_length: the FFN is experts
  EXPECT_EQ(moe->hybrid->moe->num_experts, 4);
  EXPECT_EQ(moe->hybrid->moe->num_experts_used, 2);
  EXPECT_EQ(moe->hybrid->moe->expert_ffn_size, 16);
  EXPECT_EQ(moe->hybrid->moe->shared_expert_ffn_size, 24);
  EXPECT_THAT(next->hybrid->rope_sections, ElementsAre(0, 0, 0, 0));
  EXPECT_THAT(moe->hybrid->rope_sections, ElementsAre(2, 1, 1, 0));
}

// Qwen3-Next-80B-A3B's published hyper-parameters: 75.4 MiB of recurrent state per sequence, as
// llama.cpp's n_embd_r + n_embd_s give it ((3 x 8192 + 128 x 4096) f32 per GDN layer x 36).
TEST(HybridConfig, Qwen3NextAtRealSizeHoldsLlamaCppsStateSize) {
  TinyHybridGguf fixture("qwen3next");
  fixture.SetUint32(fixture.Key("block_count"), 48);
  fixture.SetUint32(fixture.Key("embedding_length"), 2048);
  fixture.SetUint32(fixture.Key("attention.head_count"), 16);
  fixture.SetUint32(fixture.Key("attention.key_length"), 256);
  fixture.SetUint32(fixture.Key("attention.value_length"), 256);
  fixture.SetUint32(fixture.Key("rope.dimension_count"), 64);
  fixture.SetUint32(fixture.Key("ssm.state_size"), 128);
  fixture.SetUint32(fixture.Key("ssm.group_count"), 16);
  fixture.SetUint32(fixture.Key("ssm.time_step_rank"), 32);
  fixture.SetUint32(fixture.Key("ssm.inner_size"), 4096);
  fixture.SetUint32(fixture.Key("expert_count"), 512);
  fixture.SetUint32(fixture.Key("expert_used_count"), 10);
  auto config = Read(fixture);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(CountLayers(*config->hybrid, kG), 36);
  EXPECT_EQ(CountLayers(*config->hybrid, kA), 12);
  EXPECT_EQ(PerSequenceStateBytes(*config->hybrid).total, int64_t{36} * (3 * 8192 + 128 * 4096) * 4);
  EXPECT_EQ(DescribeLayerLayout(*config->hybrid),
            "48 = 36 GDN + 12 attention (every 4th: 3, 7, 11, 15, ..., 47)");
}

TEST(HybridConfig, DescribesTheTinyLayout) {
  auto config = Read(TinyHybridGguf("qwen35"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(DescribeLayerLayout(*config->hybrid), "8 = 6 GDN + 2 attention (every 4th: 3, 7)");
}

TEST(HybridConfig, AbsentIntervalIsLlamaCppsDefaultOfFour) {
  TinyHybridGguf fixture("qwen35");
  fixture.RemoveKey(fixture.Key("full_attention_interval"));
  auto config = Read(fixture);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->hybrid->layer_kinds, ElementsAre(kG, kG, kG, kA, kG, kG, kG, kA));
}

TEST(HybridConfig, RecurrentLayersListOverridesTheInterval) {
  TinyHybridGguf fixture("qwen35moe");
  gguf::GgufArray flags;
  flags.element_type = gguf::GgufValueType::kBool;
  for (bool recurrent : {false, true, true, true, true, false, true, true}) {
    flags.elements.emplace_back(gguf::GgufValue::Storage(std::in_place_type<bool>, recurrent));
  }
  fixture.SetValue(fixture.Key("attention.recurrent_layers"),
                   gguf::GgufValue(gguf::GgufValue::Storage(std::move(flags))));
  auto config = Read(fixture);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->hybrid->layer_kinds, ElementsAre(kA, kG, kG, kG, kG, kA, kG, kG));
  EXPECT_EQ(config->hybrid->full_attention_interval, 0);
  EXPECT_EQ(DescribeLayerLayout(*config->hybrid), "8 = 6 GDN + 2 attention (attention at 0, 5)");
}

TEST(HybridConfig, NextnBlocksAreCountedInBlockCountButNotInTheTrunk) {
  TinyHybridGguf fixture("qwen35moe");
  fixture.SetUint32(fixture.Key("block_count"), 9);
  fixture.SetUint32(fixture.Key("nextn_predict_layers"), 1);
  auto config = Read(fixture);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_layers, 8);
  EXPECT_EQ(config->hybrid->num_nextn_layers, 1);
  EXPECT_EQ(config->hybrid->layer_kinds.size(), 8u);
}

TEST(HybridConfig, ExpertWidthsFallBackAsLlamaCppDoes) {
  TinyHybridGguf fixture("qwen35moe");
  fixture.RemoveKey(fixture.Key("expert_feed_forward_length"));
  fixture.RemoveKey(fixture.Key("expert_shared_feed_forward_length"));
  fixture.SetUint32(fixture.Key("feed_forward_length"), 40);
  auto config = Read(fixture);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->hybrid->moe->expert_ffn_size, 20);         // ffn / experts used
  EXPECT_EQ(config->hybrid->moe->shared_expert_ffn_size, 40);  // ffn
}

TEST(HybridConfig, LlamaHasNoHybridLayout) {
  gguf::GgufWriter writer;
  writer.AddString("general.architecture", "llama");
  writer.AddUint32("llama.block_count", 2);
  writer.AddUint32("llama.embedding_length", 64);
  writer.AddUint32("llama.feed_forward_length", 128);
  writer.AddUint32("llama.attention.head_count", 4);
  writer.AddUint32("llama.context_length", 256);
  writer.AddUint32("llama.vocab_size", 300);
  auto file = gguf::GgufFile::FromBuffer(writer.Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  auto config = ReadModelConfig(**file);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->hybrid.has_value());
  EXPECT_EQ(config->num_layers, 2);
}

// --- One-line errors naming the key ---

TEST_P(HybridArchitectures, MissingSsmKeyIsNamed) {
  for (const char* suffix : {"ssm.conv_kernel", "ssm.state_size", "ssm.group_count",
                             "ssm.time_step_rank", "ssm.inner_size",
                             "attention.layer_norm_rms_epsilon"}) {
    TinyHybridGguf fixture(GetParam());
    fixture.RemoveKey(fixture.Key(suffix));
    EXPECT_EQ(ErrorOf(fixture),
              absl::StrCat("model metadata is missing '", fixture.Key(suffix), "'"));
  }
}

TEST_P(HybridArchitectures, ConvKernelOfZeroIsNamed) {
  TinyHybridGguf fixture(GetParam());
  fixture.SetUint32(fixture.Key("ssm.conv_kernel"), 0);
  EXPECT_EQ(ErrorOf(fixture),
            absl::StrCat("model metadata '", fixture.Key("ssm.conv_kernel"),
                         "' = 0 is out of range"));
}

TEST_P(HybridArchitectures, ValueHeadsNotAMultipleOfKeyHeads) {
  TinyHybridGguf fixture(GetParam());
  fixture.SetUint32(fixture.Key("ssm.group_count"), 3);  // 4 value heads
  const std::string error = ErrorOf(fixture);
  EXPECT_THAT(error, HasSubstr(fixture.Key("ssm.time_step_rank") + "' = 4"));
  EXPECT_THAT(error, HasSubstr("is not a multiple of '" + fixture.Key("ssm.group_count") +
                               "' = 3"));
}

TEST_P(HybridArchitectures, InnerSizeMustBeStateSizeTimesValueHeads) {
  TinyHybridGguf fixture(GetParam());
  fixture.SetUint32(fixture.Key("ssm.inner_size"), 48);
  EXPECT_THAT(ErrorOf(fixture), HasSubstr(fixture.Key("ssm.inner_size") + "' = 48 must be"));
}

TEST_P(HybridArchitectures, KvHeadsNotDividingHeads) {
  TinyHybridGguf fixture(GetParam());
  fixture.SetUint32(fixture.Key("attention.head_count_kv"), 3);
  EXPECT_THAT(ErrorOf(fixture), HasSubstr("head_count_kv 3 does not divide head_count 4"));
}

TEST_P(HybridArchitectures, ValueLengthMustEqualKeyLength) {
  TinyHybridGguf fixture(GetParam());
  fixture.SetUint32(fixture.Key("attention.value_length"), 32);
  EXPECT_THAT(ErrorOf(fixture),
              HasSubstr(fixture.Key("attention.value_length") + "' = 32 must equal the head "
                                                                "dim 16"));
}

TEST_P(HybridArchitectures, IntervalOfZeroIsNamed) {
  TinyHybridGguf fixture(GetParam());
  fixture.SetUint32(fixture.Key("full_attention_interval"), 0);
  EXPECT_THAT(ErrorOf(fixture), HasSubstr(fixture.Key("full_attention_interval") + "' = 0"));
}

TEST_P(HybridArchitectures, NextnLayersMustLeaveATrunk) {
  TinyHybridGguf fixture(GetParam());
  fixture.SetUint32(fixture.Key("nextn_predict_layers"), 8);
  EXPECT_THAT(ErrorOf(fixture),
              HasSubstr(fixture.Key("nextn_predict_layers") + "' = 8 leaves no layers"));
}

TEST(HybridConfigErrors, RecurrentLayersNeedOneEntryPerBlock) {
  TinyHybridGguf fixture("qwen35");
  gguf::GgufArray flags;
  flags.element_type = gguf::GgufValueType::kUint8;
  for (int i = 0; i < 5; ++i) {
    flags.elements.emplace_back(gguf::GgufValue::Storage(std::in_place_type<uint8_t>, 1));
  }
  fixture.SetValue(fixture.Key("attention.recurrent_layers"),
                   gguf::GgufValue(gguf::GgufValue::Storage(std::move(flags))));
  EXPECT_THAT(ErrorOf(fixture), HasSubstr("has 5 entries; block_count is 8"));
}

TEST(HybridConfigErrors, ExpertsUsedAboveExpertCount) {
  for (const char* arch : {"qwen3next", "qwen35moe"}) {
    TinyHybridGguf fixture(arch);
    fixture.SetUint32(fixture.Key("expert_used_count"), 5);
    EXPECT_EQ(ErrorOf(fixture), absl::StrCat("model metadata '", arch,
                                             ".expert_used_count' = 5 exceeds '", arch,
                                             ".expert_count' = 4"));
  }
}

TEST(HybridConfigErrors, ZeroExpertsUsedOrNoExperts) {
  TinyHybridGguf zero_used("qwen35moe");
  zero_used.SetUint32(zero_used.Key("expert_used_count"), 0);
  EXPECT_EQ(ErrorOf(zero_used), "model metadata 'qwen35moe.expert_used_count' = 0 is out of range");
  TinyHybridGguf no_experts("qwen3next");
  no_experts.RemoveKey(no_experts.Key("expert_count"));
  EXPECT_EQ(ErrorOf(no_experts), "model metadata is missing 'qwen3next.expert_count'");
}

TEST(HybridConfigErrors, NoExpertWidthAnywhere) {
  TinyHybridGguf fixture("qwen35moe");  // has no feed_forward_length to fall back on
  fixture.RemoveKey(fixture.Key("expert_feed_forward_length"));
  EXPECT_EQ(ErrorOf(fixture), "model metadata is missing 'qwen35moe.expert_feed_forward_length'");
}

TEST(HybridConfigErrors, DenseQwen35NeedsItsFeedForwardLength) {
  TinyHybridGguf fixture("qwen35");
  fixture.RemoveKey(fixture.Key("feed_forward_length"));
  EXPECT_EQ(ErrorOf(fixture), "model metadata is missing 'qwen35.feed_forward_length'");
}

// ggml's interleaved assignment: [11, 11, 10, 0] (the published Qwen3.5 sections, 32 pairs) and
// [1, 1, 1, 0] (sectors wrap every 3 pairs) put every pair on a text axis.
TEST(HybridConfig, RopeSectionsThatKeepEveryPairOnTextAxes) {
  for (const std::vector<int32_t>& sections :
       {std::vector<int32_t>{1, 1, 1, 0}, std::vector<int32_t>{2, 1, 1}}) {
    TinyHybridGguf fixture("qwen35");
    gguf::GgufArray values;
    values.element_type = gguf::GgufValueType::kInt32;
    for (int32_t v : sections) {
      values.elements.emplace_back(gguf::GgufValue::Storage(std::in_place_type<int32_t>, v));
    }
    fixture.SetValue(fixture.Key("rope.dimension_sections"),
                     gguf::GgufValue(gguf::GgufValue::Storage(std::move(values))));
    EXPECT_TRUE(Read(fixture).ok()) << sections.size();
  }
  TinyHybridGguf published("qwen35");
  published.SetUint32(published.Key("attention.key_length"), 256);
  published.SetUint32(published.Key("attention.value_length"), 256);
  published.SetUint32(published.Key("rope.dimension_count"), 64);
  gguf::GgufArray values;
  values.element_type = gguf::GgufValueType::kInt32;
  for (int32_t v : {11, 11, 10, 0}) {
    values.elements.emplace_back(gguf::GgufValue::Storage(std::in_place_type<int32_t>, v));
  }
  published.SetValue(published.Key("rope.dimension_sections"),
                     gguf::GgufValue(gguf::GgufValue::Storage(std::move(values))));
  auto config = Read(published);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->hybrid->rope_sections, ElementsAre(11, 11, 10, 0));
}

TEST(HybridConfigErrors, RopeSectionsMustCoverTheRotatedPairs) {
  TinyHybridGguf missing("qwen35moe");
  missing.RemoveKey(missing.Key("rope.dimension_sections"));
  EXPECT_EQ(ErrorOf(missing), "model metadata is missing 'qwen35moe.rope.dimension_sections'");
  TinyHybridGguf short_sections("qwen35");
  gguf::GgufArray values;
  values.element_type = gguf::GgufValueType::kInt32;
  for (int32_t v : {1, 0, 1, 0}) {  // pair 1 -> sector 1: the h axis has no section
    values.elements.emplace_back(gguf::GgufValue::Storage(std::in_place_type<int32_t>, v));
  }
  short_sections.SetValue(short_sections.Key("rope.dimension_sections"),
                          gguf::GgufValue(gguf::GgufValue::Storage(std::move(values))));
  EXPECT_THAT(ErrorOf(short_sections),
              HasSubstr("'qwen35.rope.dimension_sections' = [1, 0, 1, 0] puts rotated pair 1 of 4 "
                        "on the fourth M-RoPE axis"));
}

TEST(HybridConfigErrors, AbsurdStateIsRefused) {
  TinyHybridGguf fixture("qwen35");
  fixture.SetUint32(fixture.Key("ssm.state_size"), 1 << 16);
  fixture.SetUint32(fixture.Key("ssm.inner_size"), 4 << 16);
  EXPECT_THAT(ErrorOf(fixture), HasSubstr("bytes of recurrent state per sequence"));
}

TEST(HybridConfig, NeoxListIncludesTheHybrids) {
  for (const char* arch : {"qwen3next", "qwen35", "qwen35moe"}) {
    EXPECT_TRUE(ArchitectureUsesNeoxRope(arch)) << arch;
    EXPECT_TRUE(IsHybridArchitecture(arch)) << arch;
  }
  EXPECT_FALSE(IsHybridArchitecture("qwen3"));
  EXPECT_FALSE(HybridArchitectureHasExperts("qwen35"));
}

}  // namespace
}  // namespace tessera::model
