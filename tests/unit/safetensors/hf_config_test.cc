// config.json -> GGUF metadata, read back through model::ReadModelConfig: every field lands
// where the GGUF converter puts it, rope scaling included, and what cannot be represented is an
// error naming it.
#include "common/safetensors/hf_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/gguf/gguf_file.h"
#include "common/model/model_config.h"

namespace tessera::safetensors {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

// Qwen2.5-7B-Instruct's config.json (with its documented YaRN extension for long context).
Json Qwen25Config() {
  return Json::parse(R"({
    "architectures": ["Qwen2ForCausalLM"], "hidden_act": "silu", "hidden_size": 3584,
    "intermediate_size": 18944, "max_position_embeddings": 32768, "num_attention_heads": 28,
    "num_hidden_layers": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "sliding_window": 131072, "tie_word_embeddings": false,
    "torch_dtype": "bfloat16", "use_sliding_window": false, "vocab_size": 152064,
    "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"}})");
}

// Llama-3.1-8B-Instruct's config.json.
Json Llama31Config() {
  return Json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "hidden_act": "silu",
    "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 131072,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": false,
    "vocab_size": 128256, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0,
    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
}

struct Read {
  absl::Status status;
  HfModelConfig hf;
  model::ModelConfig config;
};

Read ReadBack(const Json& json) {
  Read out;
  MetadataList metadata;
  absl::StatusOr<HfModelConfig> hf = ReadHfModelConfig(json, &metadata);
  if (!hf.ok()) return {hf.status(), {}, {}};
  out.hf = *hf;
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file =
      gguf::GgufFile::FromParts(std::move(metadata).Take(), {}, nullptr);
  if (!file.ok()) return {file.status(), {}, {}};
  absl::StatusOr<model::ModelConfig> config = model::ReadModelConfig(**file);
  out.status = config.status();
  if (config.ok()) out.config = *config;
  return out;
}

TEST(HfConfigTest, Qwen25MapsLikeTheConverterWithYarn) {
  const Read r = ReadBack(Qwen25Config());
  ASSERT_TRUE(r.status.ok()) << r.status;
  const model::ModelConfig& c = r.config;
  EXPECT_EQ(c.architecture, "qwen2");
  EXPECT_EQ(c.num_layers, 28);
  EXPECT_EQ(c.hidden_size, 3584);
  EXPECT_EQ(c.ffn_size, 18944);
  EXPECT_EQ(c.num_heads, 28);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rope_dim, 128);
  EXPECT_EQ(c.context_length, 32768);
  EXPECT_EQ(c.vocab_size, 152064);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_FLOAT_EQ(static_cast<float>(c.rms_norm_eps), 1e-6f);
  EXPECT_TRUE(c.rope_neox);
  EXPECT_EQ(c.rope_scaling.type, model::RopeScalingType::kYarn);
  EXPECT_EQ(c.rope_scaling.factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_context_length, 32768);
  EXPECT_FALSE(r.hf.tie_word_embeddings);
  EXPECT_EQ(r.hf.hf_architecture, "Qwen2ForCausalLM");
}

TEST(HfConfigTest, LlamaIsMarkedNeoxAndLlama3ScalingBecomesRopeFreqs) {
  const Read r = ReadBack(Llama31Config());
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.config.architecture, "llama");
  EXPECT_TRUE(r.config.rope_neox);  // HF's Q/K rows are not permuted: NeoX pairs
  EXPECT_EQ(r.config.rope_scaling.type, model::RopeScalingType::kNone);
  EXPECT_EQ(r.config.rope_theta, 500000.0);
  ASSERT_EQ(r.hf.rope_freqs.size(), 64u);
  // High frequencies keep their angle, low ones are divided by the factor, the band between is
  // smoothed (llama.cpp's converter): wavelength 2π·500000^(2i/128).
  EXPECT_EQ(r.hf.rope_freqs[0], 1.0f);
  EXPECT_EQ(r.hf.rope_freqs[63], 8.0f);
  int smoothed = 0;
  for (float f : r.hf.rope_freqs) smoothed += f > 1.0f && f < 8.0f;
  EXPECT_GT(smoothed, 0);
  for (size_t i = 1; i < r.hf.rope_freqs.size(); ++i) {
    EXPECT_GE(r.hf.rope_freqs[i], r.hf.rope_freqs[i - 1]);
  }
}

TEST(HfConfigTest, Qwen3HeadDimAndLinearScaling) {
  Json json = Qwen25Config();
  json["architectures"] = Json::array({"Qwen3ForCausalLM"});
  json["head_dim"] = 64;
  json["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  json["tie_word_embeddings"] = true;
  const Read r = ReadBack(json);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.config.architecture, "qwen3");
  EXPECT_EQ(r.config.head_dim, 64);
  EXPECT_EQ(r.config.rope_scaling.type, model::RopeScalingType::kLinear);
  EXPECT_EQ(r.config.rope_scaling.factor, 2.0);
  EXPECT_TRUE(r.hf.tie_word_embeddings);
}

TEST(HfConfigTest, TransformersV5RopeParametersAreRead) {
  Json json = Qwen25Config();
  json.erase("rope_scaling");
  json.erase("rope_theta");
  json["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 250000.0}};
  const Read r = ReadBack(json);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.config.rope_theta, 250000.0);
  EXPECT_EQ(r.config.rope_scaling.type, model::RopeScalingType::kNone);
}

TEST(HfConfigTest, WhatCannotBeRepresentedIsAnErrorNamingIt) {
  struct Case {
    const char* label;
    Json patch;
    absl::StatusCode code;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"arch",
       {{"architectures", Json::array({"MistralForCausalLM"})}},
       absl::StatusCode::kUnimplemented,
       "architectures[0] 'MistralForCausalLM' is not supported"},
      {"dynamic",
       {{"rope_scaling", {{"type", "dynamic"}, {"factor", 2.0}}}},
       absl::StatusCode::kUnimplemented,
       "rope scaling type 'dynamic' is not supported"},
      {"mscale",
       {{"rope_scaling",
         {{"type", "yarn"},
          {"factor", 4.0},
          {"mscale", 0.7},
          {"original_max_position_embeddings", 4096}}}},
       absl::StatusCode::kUnimplemented,
       "rope scaling key 'mscale' of type yarn"},
      {"sliding",
       {{"use_sliding_window", true}},
       absl::StatusCode::kUnimplemented,
       "use_sliding_window"},
      {"act", {{"hidden_act", "gelu"}}, absl::StatusCode::kUnimplemented, "hidden_act \"gelu\""},
      {"missing",
       {{"hidden_size", nullptr}},
       absl::StatusCode::kInvalidArgument,
       "'hidden_size' is missing"},
      {"negative",
       {{"num_hidden_layers", -2}},
       absl::StatusCode::kInvalidArgument,
       "'num_hidden_layers' = -2 is not a positive integer"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    Json json = Qwen25Config();
    json.merge_patch(c.patch);
    const Read r = ReadBack(json);
    ASSERT_FALSE(r.status.ok());
    EXPECT_EQ(r.status.code(), c.code) << r.status;
    EXPECT_THAT(r.status.message(), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace tessera::safetensors
