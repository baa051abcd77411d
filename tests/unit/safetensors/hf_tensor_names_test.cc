// The HF <-> GGUF tensor names, written out by hand from llama.cpp's gguf-py tensor_mapping.py
// (MODEL_TENSOR entries for "model.layers.{bid}...." of llama-hf / qwen2 / qwen3).
#include "common/safetensors/hf_tensor_names.h"

#include <gtest/gtest.h>

namespace tessera::safetensors {
namespace {

constexpr std::pair<const char*, const char*> kExpected[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
    {"model.layers.0.input_layernorm.weight", "blk.0.attn_norm.weight"},
    {"model.layers.17.self_attn.q_proj.weight", "blk.17.attn_q.weight"},
    {"model.layers.17.self_attn.k_proj.weight", "blk.17.attn_k.weight"},
    {"model.layers.17.self_attn.v_proj.weight", "blk.17.attn_v.weight"},
    {"model.layers.17.self_attn.o_proj.weight", "blk.17.attn_output.weight"},
    {"model.layers.3.self_attn.q_proj.bias", "blk.3.attn_q.bias"},
    {"model.layers.3.self_attn.k_proj.bias", "blk.3.attn_k.bias"},
    {"model.layers.3.self_attn.v_proj.bias", "blk.3.attn_v.bias"},
    {"model.layers.5.self_attn.q_norm.weight", "blk.5.attn_q_norm.weight"},
    {"model.layers.5.self_attn.k_norm.weight", "blk.5.attn_k_norm.weight"},
    {"model.layers.9.post_attention_layernorm.weight", "blk.9.ffn_norm.weight"},
    {"model.layers.120.mlp.gate_proj.weight", "blk.120.ffn_gate.weight"},
    {"model.layers.120.mlp.up_proj.weight", "blk.120.ffn_up.weight"},
    {"model.layers.120.mlp.down_proj.weight", "blk.120.ffn_down.weight"},
};

TEST(HfTensorNamesTest, MapsLikeLlamaCppBothWays) {
  for (const auto& [hf, gguf] : kExpected) {
    EXPECT_EQ(GgufTensorName(hf), gguf) << hf;
    EXPECT_EQ(HfTensorName(gguf), hf) << gguf;
  }
}

TEST(HfTensorNamesTest, TensorsWeDoNotRunHaveNoName) {
  for (const char* hf :
       {"model.layers.0.self_attn.o_proj.bias", "model.layers.0.mlp.gate.weight",
        "model.layers.x.input_layernorm.weight", "model.layers..mlp.up_proj.weight",
        "model.layers.0.mlp.up_proj.weight_scale", "model.vision.weight", "blk.0.attn_q.weight"}) {
    EXPECT_EQ(GgufTensorName(hf), std::nullopt) << hf;
  }
  EXPECT_EQ(HfTensorName("model.layers.0.self_attn.q_proj.weight"), std::nullopt);
}

TEST(HfTensorNamesTest, RotaryInverseFrequenciesAreRecomputed) {
  EXPECT_TRUE(IsRecomputedHfTensor("model.layers.4.self_attn.rotary_emb.inv_freq"));
  EXPECT_FALSE(IsRecomputedHfTensor("model.layers.4.self_attn.q_proj.weight"));
}

}  // namespace
}  // namespace tessera::safetensors
