// The llama-family weights on a device, in the runner's compute type (bf16, f16 or f32): every
// GGUF tensor is dequantized on the host (common/gguf, bit-exact with ggml) and rounded once to
// the compute type at load, then uploaded; the token embedding table doubles as the output head
// when the model ties them. Also uploads the RoPE cos/sin table the rope kernel reads.
// (DeviceLlamaWeights of a synthetic shape, random and made on the device: dummy_llama_weights.h.)
//
// Ownership: owns every device allocation (freed with it); the runtime must outlive it.
// Immutable after upload; the loader thread builds it, the step thread reads it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "kernels/cpu/rope.h"
#include "kernels/device/device_memory.h"
#include "kernels/device/device_runtime.h"
#include "worker/cpu/llama_weights.h"

namespace tessera::worker {

// A row-major [rows, cols] matrix on the device (rows = output features).
struct DeviceMatrix {
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
};

// One layer with the member names the model definition uses (worker/models/llama_model.h).
// Vectors are null when the model has no such tensor.
struct DeviceLlamaLayer {
  const void* attn_norm = nullptr;
  const void* ffn_norm = nullptr;
  const void* bq = nullptr;
  const void* bk = nullptr;
  const void* bv = nullptr;
  const void* q_norm = nullptr;
  const void* k_norm = nullptr;
  DeviceMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
};

struct DeviceLlamaWeights {
  device::DataType dtype = device::DataType::kBf16;
  DeviceMatrix token_embd;   // [vocab, hidden], also the embedding table
  DeviceMatrix output;       // [vocab, hidden]; token_embd's memory when tied
  const void* output_norm = nullptr;
  std::vector<DeviceLlamaLayer> layers;
  const float* rope_cos_sin = nullptr;  // RopeTable layout, [rope_positions, rope_dim / 2, 2]
  int rope_positions = 0;
  int64_t bytes = 0;          // device bytes of all of the above
  double load_seconds = 0;    // dequantize + convert + upload
  std::vector<device::DeviceMemory> memory;  // backing store
};

// Errors: the runtime's (too little memory names the size), or UNIMPLEMENTED naming a tensor
// type this loader cannot dequantize.
absl::StatusOr<std::unique_ptr<DeviceLlamaWeights>> UploadLlamaWeights(
    device::DeviceRuntime& runtime, const LlamaWeights& weights, const kernels::cpu::RopeTable& rope,
    device::DataType dtype);

}  // namespace tessera::worker
