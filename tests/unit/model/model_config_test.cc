#include "common/model/model_config.h"

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/gguf/gguf_writer.h"

namespace tessera::model {
namespace {

using ::testing::HasSubstr;

constexpr char kDefaultModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

absl::StatusOr<std::unique_ptr<gguf::GgufFile>> Parse(const gguf::GgufWriter& writer) {
  return gguf::GgufFile::FromBuffer(writer.Serialize());
}

gguf::GgufWriter MinimalLlama() {
  gguf::GgufWriter writer;
  writer.AddString("general.architecture", "llama");
  writer.AddUint32("llama.block_count", 2);
  writer.AddUint32("llama.embedding_length", 64);
  writer.AddUint32("llama.feed_forward_length", 128);
  writer.AddUint32("llama.attention.head_count", 4);
  writer.AddUint32("llama.context_length", 256);
  writer.AddUint32("llama.vocab_size", 300);
  return writer;
}

TEST(ModelConfig, ReadsTheDefaultModelAsItsMetadataSays) {
  ASSERT_TRUE(std::filesystem::exists(kDefaultModel))
      << kDefaultModel << " is missing: run scripts/fetch_model.sh";
  auto file = gguf::GgufFile::Open(kDefaultModel);
  ASSERT_TRUE(file.ok()) << file.status();
  auto config = ReadModelConfig(**file);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, "llama");
  EXPECT_EQ(config->num_layers, 30);
  EXPECT_EQ(config->hidden_size, 576);
  EXPECT_EQ(config->ffn_size, 1536);
  EXPECT_EQ(config->num_heads, 9);
  EXPECT_EQ(config->num_kv_heads, 3);
  EXPECT_EQ(config->head_dim, 64);
  EXPECT_EQ(config->rope_dim, 64);
  EXPECT_EQ(config->context_length, 8192);
  EXPECT_EQ(config->vocab_size, 49152);
  EXPECT_DOUBLE_EQ(config->rope_theta, 100000.0);
  EXPECT_NEAR(config->rms_norm_eps, 1e-5, 1e-12);
  EXPECT_TRUE(config->tied_embeddings);
  EXPECT_EQ(config->rope_scaling.type, RopeScalingType::kNone);
  EXPECT_EQ(config->rope_scaling.factor, 1.0);
}

TEST(ModelConfig, DefaultsKvHeadsHeadDimAndRope) {
  auto file = Parse(MinimalLlama());
  ASSERT_TRUE(file.ok()) << file.status();
  auto config = ReadModelConfig(**file);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_kv_heads, 4);
  EXPECT_EQ(config->head_dim, 16);
  EXPECT_EQ(config->rope_dim, 16);
  EXPECT_DOUBLE_EQ(config->rope_theta, 10000.0);
}

TEST(ModelConfig, MissingRequiredKeyIsNamed) {
  gguf::GgufWriter writer;
  writer.AddString("general.architecture", "llama");
  writer.AddUint32("llama.embedding_length", 64);
  auto file = Parse(writer);
  ASSERT_TRUE(file.ok()) << file.status();
  auto config = ReadModelConfig(**file);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr("llama.block_count"));
}

TEST(ModelConfig, RejectsKvHeadsThatDoNotDivideHeads) {
  gguf::GgufWriter writer = MinimalLlama();
  writer.AddUint32("llama.attention.head_count_kv", 3);
  auto file = Parse(writer);
  ASSERT_TRUE(file.ok()) << file.status();
  auto config = ReadModelConfig(**file);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr("head_count_kv 3"));
}

TEST(ModelConfig, RejectsZeroLayers) {
  gguf::GgufWriter writer;
  writer.AddString("general.architecture", "qwen2");
  writer.AddUint32("qwen2.block_count", 0);
  auto file = Parse(writer);
  ASSERT_TRUE(file.ok()) << file.status();
  auto config = ReadModelConfig(**file);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr("qwen2.block_count"));
}

TEST(ModelConfig, RejectsOddOrOversizedRopeDim) {
  for (uint32_t rope_dim : {15u, 18u}) {  // head_dim is 16
    gguf::GgufWriter writer = MinimalLlama();
    writer.AddUint32("llama.rope.dimension_count", rope_dim);
    auto file = Parse(writer);
    ASSERT_TRUE(file.ok()) << file.status();
    auto config = ReadModelConfig(**file);
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << rope_dim;
    EXPECT_THAT(config.status().message(), HasSubstr("llama.rope.dimension_count"));
  }
}

// --- RoPE scaling ({arch}.rope.scaling.*, llama.cpp key names and defaults) ---

absl::StatusOr<ModelConfig> ReadWith(const std::function<void(gguf::GgufWriter&)>& add_keys) {
  gguf::GgufWriter writer = MinimalLlama();
  add_keys(writer);
  auto file = Parse(writer);
  if (!file.ok()) return file.status();
  return ReadModelConfig(**file);
}

TEST(ModelConfigRopeScaling, AbsentKeysMeanNoScalingWithLlamaCppDefaults) {
  auto config = ReadWith([](gguf::GgufWriter&) {});
  ASSERT_TRUE(config.ok()) << config.status();
  const RopeScaling& s = config->rope_scaling;
  EXPECT_EQ(s.type, RopeScalingType::kNone);
  EXPECT_EQ(s.factor, 1.0);
  EXPECT_EQ(s.original_context_length, 256);  // the model's context_length
  EXPECT_EQ(s.attn_factor, 1.0);
  EXPECT_EQ(s.yarn_beta_fast, 32.0);
  EXPECT_EQ(s.yarn_beta_slow, 1.0);
}

TEST(ModelConfigRopeScaling, ReadsLinear) {
  auto config = ReadWith([](gguf::GgufWriter& w) {
    w.AddString("llama.rope.scaling.type", "linear");
    w.AddFloat32("llama.rope.scaling.factor", 2.0f);
  });
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(config->rope_scaling.factor, 2.0);
  EXPECT_EQ(RopeScalingTypeName(config->rope_scaling.type), "linear");
}

// llama.cpp defaults the type to "linear", so a bare factor (or the older rope.scale_linear key
// that early Llama 2 long-context conversions wrote) scales linearly.
TEST(ModelConfigRopeScaling, FactorWithoutTypeIsLinearAndLegacyKeyIsRead) {
  auto legacy =
      ReadWith([](gguf::GgufWriter& w) { w.AddFloat32("llama.rope.scale_linear", 4.0f); });
  ASSERT_TRUE(legacy.ok()) << legacy.status();
  EXPECT_EQ(legacy->rope_scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(legacy->rope_scaling.factor, 4.0);
  auto both = ReadWith([](gguf::GgufWriter& w) {
    w.AddFloat32("llama.rope.scale_linear", 4.0f);
    w.AddFloat32("llama.rope.scaling.factor", 8.0f);
  });
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->rope_scaling.factor, 8.0);  // the new key wins
}

TEST(ModelConfigRopeScaling, ReadsYarnWithEveryKey) {
  auto config = ReadWith([](gguf::GgufWriter& w) {
    w.AddString("llama.rope.scaling.type", "yarn");
    w.AddFloat32("llama.rope.scaling.factor", 4.0f);
    w.AddUint32("llama.rope.scaling.original_context_length", 64);
    w.AddFloat32("llama.rope.scaling.attn_factor", 0.75f);
    w.AddFloat32("llama.rope.scaling.yarn_beta_fast", 16.0f);
    w.AddFloat32("llama.rope.scaling.yarn_beta_slow", 2.0f);
  });
  ASSERT_TRUE(config.ok()) << config.status();
  const RopeScaling& s = config->rope_scaling;
  EXPECT_EQ(s.type, RopeScalingType::kYarn);
  EXPECT_EQ(s.factor, 4.0);
  EXPECT_EQ(s.original_context_length, 64);
  EXPECT_EQ(s.attn_factor, 0.75);
  EXPECT_EQ(s.yarn_beta_fast, 16.0);
  EXPECT_EQ(s.yarn_beta_slow, 2.0);
}

TEST(ModelConfigRopeScaling, NoneIgnoresTheFactor) {
  auto config = ReadWith([](gguf::GgufWriter& w) {
    w.AddString("llama.rope.scaling.type", "none");
    w.AddFloat32("llama.rope.scaling.factor", 8.0f);
  });
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->rope_scaling.type, RopeScalingType::kNone);
  EXPECT_EQ(config->rope_scaling.factor, 1.0);
}

TEST(ModelConfigRopeScaling, UnsupportedTypeNamesKeyAndValue) {
  for (const char* type : {"longrope", "dynamic", ""}) {
    auto config =
        ReadWith([&](gguf::GgufWriter& w) { w.AddString("llama.rope.scaling.type", type); });
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << type;
    EXPECT_THAT(config.status().message(), HasSubstr("'llama.rope.scaling.type'"));
    EXPECT_THAT(config.status().message(), HasSubstr(std::string("'") + type + "'"));
  }
  auto not_a_string =
      ReadWith([](gguf::GgufWriter& w) { w.AddUint32("llama.rope.scaling.type", 2); });
  EXPECT_EQ(not_a_string.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(not_a_string.status().message(), HasSubstr("llama.rope.scaling.type"));
}

TEST(ModelConfigRopeScaling, BadValuesNameTheirKey) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::pair<std::string, float>> bad = {
      {"llama.rope.scaling.factor", 0.0f},         {"llama.rope.scaling.factor", -2.0f},
      {"llama.rope.scaling.factor", nan},          {"llama.rope.scaling.factor", inf},
      {"llama.rope.scale_linear", 0.0f},           {"llama.rope.scaling.attn_factor", nan},
      {"llama.rope.scaling.attn_factor", 0.0f},    {"llama.rope.scaling.yarn_beta_fast", -1.0f},
      {"llama.rope.scaling.yarn_beta_slow", inf},  {"llama.rope.freq_base", inf}};
  for (const auto& [key, value] : bad) {
    auto config = ReadWith([&](gguf::GgufWriter& w) {
      w.AddString("llama.rope.scaling.type", "yarn");
      w.AddFloat32(key, value);
    });
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << key << " " << value;
    EXPECT_THAT(config.status().message(), HasSubstr("'" + key + "'")) << value;
  }
  auto huge = ReadWith([](gguf::GgufWriter& w) {
    w.AddValue("llama.rope.scaling.factor", gguf::GgufValue(1e300));
  });
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(huge.status().message(), HasSubstr("'llama.rope.scaling.factor'"));
  auto yarn_theta_one = ReadWith([](gguf::GgufWriter& w) {
    w.AddString("llama.rope.scaling.type", "yarn");
    w.AddFloat32("llama.rope.freq_base", 1.0f);
  });
  EXPECT_EQ(yarn_theta_one.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(yarn_theta_one.status().message(), HasSubstr("llama.rope.freq_base"));
  auto zero_context = ReadWith(
      [](gguf::GgufWriter& w) { w.AddUint32("llama.rope.scaling.original_context_length", 0); });
  EXPECT_EQ(zero_context.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(zero_context.status().message(),
              HasSubstr("llama.rope.scaling.original_context_length"));
}

// --- RoPE mode (llama.cpp's llama_model_rope_type, by architecture) ---

// MinimalLlama's keys under another architecture's prefix.
gguf::GgufWriter Minimal(const std::string& arch) {
  gguf::GgufWriter writer;
  writer.AddString("general.architecture", arch);
  writer.AddUint32(arch + ".block_count", 2);
  writer.AddUint32(arch + ".embedding_length", 64);
  writer.AddUint32(arch + ".feed_forward_length", 128);
  writer.AddUint32(arch + ".attention.head_count", 4);
  writer.AddUint32(arch + ".context_length", 256);
  writer.AddUint32(arch + ".vocab_size", 300);
  return writer;
}

TEST(ModelConfigRopeMode, QwenIsNeoxAndLlamaIsNormal) {
  for (const auto& [arch, neox] : std::vector<std::pair<std::string, bool>>{
           {"llama", false}, {"qwen2", true}, {"qwen3", true}}) {
    auto file = Parse(Minimal(arch));
    ASSERT_TRUE(file.ok()) << file.status();
    auto config = ReadModelConfig(**file);
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->rope_neox, neox) << arch;
  }
}

// The safetensors view marks a HF llama (Q/K as trained, not permuted) with kRopeNeoxKey.
TEST(ModelConfigRopeMode, TheRopeNeoxKeyOverridesTheArchitecture) {
  for (const auto& [arch, value] : std::vector<std::pair<std::string, bool>>{
           {"llama", true}, {"qwen2", false}}) {
    gguf::GgufWriter writer = Minimal(arch);
    writer.AddBool(std::string(kRopeNeoxKey), value);
    auto file = Parse(writer);
    ASSERT_TRUE(file.ok()) << file.status();
    auto config = ReadModelConfig(**file);
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->rope_neox, value) << arch;
  }
  gguf::GgufWriter wrong_type = Minimal("llama");
  wrong_type.AddUint32(std::string(kRopeNeoxKey), 1);
  auto file = Parse(wrong_type);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(ReadModelConfig(**file).status().message(), HasSubstr("tessera.rope.neox"));
}

TEST(ModelConfigRopeMode, FollowsLlamaCppsList) {
  for (const char* neox :
       {"qwen2", "qwen2moe", "qwen3", "qwen3moe", "qwen3next", "qwen35", "qwen35moe"}) {
    EXPECT_TRUE(ArchitectureUsesNeoxRope(neox)) << neox;
  }
  // Names are matched exactly, as llama.cpp's llm_arch_from_string does.
  for (const char* normal : {"llama", "Qwen2", "qwen2 ", ""}) {
    EXPECT_FALSE(ArchitectureUsesNeoxRope(normal)) << normal;
  }
}

}  // namespace
}  // namespace tessera::model
