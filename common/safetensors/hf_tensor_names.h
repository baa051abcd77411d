// Hugging Face tensor names of LlamaForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM checkpoints
// and their GGUF names, as llama.cpp's gguf-py/gguf/tensor_mapping.py maps them:
//   model.embed_tokens.weight                   token_embd.weight
//   model.norm.weight                           output_norm.weight
//   lm_head.weight                              output.weight
//   model.layers.N.input_layernorm.weight       blk.N.attn_norm.weight
//   model.layers.N.self_attn.q_proj.{weight,bias}   blk.N.attn_q.{weight,bias} (k, v likewise)
//   model.layers.N.self_attn.o_proj.weight      blk.N.attn_output.weight
//   model.layers.N.self_attn.q_norm.weight      blk.N.attn_q_norm.weight (k_norm likewise)
//   model.layers.N.post_attention_layernorm.weight  blk.N.ffn_norm.weight
//   model.layers.N.mlp.{gate,up,down}_proj.weight   blk.N.ffn_{gate,up,down}.weight
// The dims follow ggml's order, the reverse of the safetensors shape (HF [out, in] -> [in, out]);
// the bytes are the same row-major bytes. Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tessera::safetensors {

// nullopt for a name outside the table (a tensor these architectures do not have, or one we do
// not run, such as o_proj.bias).
std::optional<std::string> GgufTensorName(std::string_view hf_name);
// The inverse (for writing a HF directory from a GGUF model); nullopt outside the table.
std::optional<std::string> HfTensorName(std::string_view gguf_name);
// Buffers some checkpoints store that the model recomputes (rotary_emb.inv_freq).
bool IsRecomputedHfTensor(std::string_view hf_name);

}  // namespace tessera::safetensors
