// The tensors of a `llama`-architecture model (SmolLM2, Llama 2/3, Qwen2/3 dense) as the CPU
// kernels read them.
//
// Matmul weights in a format the kernels read directly (F32, Q8_0, Q4_0, Q4_1) stay in the
// mmapped GGUF — kernels/cpu/matmul.h shows that is bit-identical to dequantizing them and
// faster (docs/perf/cpu-kernels.md); every other type (F16, BF16, K-quants, ...) is dequantized
// to f32 once at load into buffers owned here. Norm vectors and biases are f32.
//
// Ownership: views point into the GgufFile (which must outlive this) or into owned_.
// Immutable after load; any thread may read.
#pragma once

#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"
#include "common/model/model_config.h"
#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/weight_format.h"

namespace tessera::worker {

struct LlamaLayerWeights {
  std::span<const float> attn_norm;        // [hidden]
  kernels::cpu::WeightView wq;             // [num_heads * head_dim, hidden]
  kernels::cpu::WeightView wk;             // [num_kv_heads * head_dim, hidden]
  kernels::cpu::WeightView wv;             // [num_kv_heads * head_dim, hidden]
  kernels::cpu::WeightView wo;             // [hidden, num_heads * head_dim]
  std::span<const float> bq, bk, bv;       // optional biases (Qwen2); empty when absent
  std::span<const float> q_norm, k_norm;   // optional per-head RMSNorm (Qwen3) [head_dim]
  std::span<const float> ffn_norm;         // [hidden]
  kernels::cpu::WeightView w_gate;         // [ffn, hidden]
  kernels::cpu::WeightView w_up;           // [ffn, hidden]
  kernels::cpu::WeightView w_down;         // [hidden, ffn]
};

struct LlamaWeights {
  kernels::cpu::WeightView token_embd;     // [vocab, hidden]
  std::span<const float> output_norm;      // [hidden]
  kernels::cpu::WeightView output;         // [vocab, hidden]; token_embd when tied
  std::vector<LlamaLayerWeights> layers;
  // Optional per-pair RoPE frequency divisors (`rope_freqs.weight`, [rope_dim / 2]): Llama 3.1+
  // conversions store the "llama3" frequency scaling this way. Empty when absent.
  std::span<const float> rope_freqs;
  int64_t num_dequantized_bytes = 0;       // f32 copies made at load
  std::deque<kernels::cpu::AlignedVector<float>> owned;  // backing store for those copies
};

// INVALID_ARGUMENT naming the tensor when one is missing or has the wrong shape (or, for
// rope_freqs, holds a value that is not finite and positive); UNIMPLEMENTED
// naming the architecture when it is not a llama-family one.
absl::StatusOr<std::unique_ptr<LlamaWeights>> LoadLlamaWeights(const gguf::GgufFile& file,
                                                               const model::ModelConfig& config);

// True for architectures LoadLlamaWeights handles ("llama", "qwen2", "qwen3", ...).
bool IsLlamaFamily(const std::string& architecture);

}  // namespace tessera::worker
