// Checks a hybrid Gated-DeltaNet GGUF's tensor table against its declared layout: every tensor
// llama.cpp's loader creates for qwen3next / qwen35 / qwen35moe (src/models/*.cpp,
// load_arch_tensors) must exist with that shape, so a file whose metadata and tensors disagree is
// one line naming the tensor before any weight is read. Shapes are in ggml order (dims[0] is the
// contiguous row), compared as llama.cpp does: trailing 1s do not count. Stateless; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"
#include "common/model/model_config.h"

namespace tessera::model {

// Where llama.cpp accepts two storages of the same weights, the one this file uses (the same in
// every layer).
struct HybridTensorForms {
  // qwen3next only: the legacy fused `ssm_in` [hidden, 2 * key dim + 2 * value dim] (HF's
  // in_proj_qkvz, heads interleaved per key head) instead of `attn_qkv` + `attn_gate`.
  bool gdn_fused_qkvz = false;
  // `ffn_gate_up_exps` [hidden, 2 * expert ffn, experts] instead of ffn_gate_exps + ffn_up_exps.
  bool moe_fused_gate_up = false;
};

// One tensor the layout needs: its GGUF name and llama.cpp's shape for it.
struct ExpectedTensor {
  std::string name;             // e.g. "blk.0.ssm_a"
  std::vector<uint64_t> dims;   // ggml order
};

// The tensors of trunk layer `layer` (attention or GDN mixer, norms, dense or MoE FFN) in the
// given forms. Preconditions: config.hybrid is set and 0 <= layer < config.num_layers (checked).
std::vector<ExpectedTensor> ExpectedLayerTensors(const ModelConfig& config, int layer,
                                                 const HybridTensorForms& forms);

// Precondition: config.hybrid is set (checked), i.e. config came from ReadModelConfig on `file`.
// Checks token_embd, output_norm, output (optional: tied) and every trunk layer's tensors; the
// forms are detected from the first layer that has the choice. INVALID_ARGUMENT, one line:
// "blk.3.ssm_a: missing" or "blk.3.ssm_conv1d.weight: shape [4, 96], expected [4, 160]". The
// multi-token-prediction blocks after the trunk are not checked (the forward never reads them).
absl::StatusOr<HybridTensorForms> CheckHybridTensors(const gguf::GgufFile& file,
                                                     const ModelConfig& config);

}  // namespace tessera::model
