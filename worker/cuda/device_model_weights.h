// A model's weights on a device, in the runner's compute type (bf16, f16 or f32), indexed by
// WeightId (the plan's WeightDeclaration): every GGUF tensor is dequantized on the host
// (common/gguf, bit-exact with ggml) and rounded once to the compute type at load, then
// uploaded (kDense tensors in f32 as well); a tied output head is the embedding table's id. Also uploads the RoPE cos/sin table
// the rope kernel reads. (Weights of a synthetic shape, random and made on the device:
// dummy_model_weights.h.)
//
// Ownership: owns every device allocation (freed with it); the runtime must outlive it.
// Immutable after upload; the loader thread builds it, the step thread reads it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cpu/rope.h"
#include "kernels/device/device_memory.h"
#include "kernels/device/device_runtime.h"
#include "worker/cpu/cpu_model_weights.h"
#include "worker/models/weight_declaration.h"

namespace tessera::worker {

// One tensor on the device: row-major [experts ×] [rows, cols] (rows = output features);
// data is null for an optional tensor the model lacks. A kDense tensor (norms, biases, conv
// kernels, per-head constants) is also kept in f32 (`values`) for the kernels that read small
// per-layer constants in f32 whatever the compute type (the Gated DeltaNet gates); null when
// uploaded without it (synthetic weights).
struct DeviceWeight {
  const void* data = nullptr;
  const float* values = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t experts = 1;
};

struct DeviceModelWeights {
  device::DataType dtype = device::DataType::kBf16;
  std::vector<DeviceWeight> tensors;    // by WeightId
  const float* rope_cos_sin = nullptr;  // RopeTable layout, [rope_positions, rope_dim / 2, 2]
  int rope_positions = 0;
  int64_t bytes = 0;          // device bytes of all of the above
  double load_seconds = 0;    // dequantize + convert + upload
  std::vector<device::DeviceMemory> memory;  // backing store

  const DeviceWeight& operator[](WeightId id) const { return tensors.at(static_cast<size_t>(id)); }
};

// Errors: the runtime's (too little memory names the size), or UNIMPLEMENTED naming a tensor
// type this loader cannot dequantize.
absl::StatusOr<std::unique_ptr<DeviceModelWeights>> UploadModelWeights(
    device::DeviceRuntime& runtime, const WeightDeclaration& declaration,
    const CpuModelWeights& weights, const kernels::cpu::RopeTable& rope, device::DataType dtype);

}  // namespace tessera::worker
