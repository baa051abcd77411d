// A model's weights on a device, indexed by WeightId (the plan's WeightDeclaration). Projections
// in a quantized format with a packed form stay quantized when asked (WeightUploadOptions:
// repacked byte for byte into kernels/cuda/packed_format.h's planar layout, kernels/cuda/
// packed_weight.h); every other GGUF tensor is dequantized on the host (common/gguf, bit-exact
// with ggml) and rounded once to the compute type (bf16, f16 or f32), then uploaded (kDense
// tensors in f32 as well); a tied output head is the embedding table's id. Also uploads the RoPE cos/sin table
// the rope kernel reads. (Weights of a synthetic shape, random and made on the device:
// dummy_model_weights.h.)
//
// Ownership: owns every device allocation (freed with it); the runtime must outlive it.
// Immutable after upload; the loader thread builds it, the step thread reads it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"
#include "common/util/load_progress.h"
#include "kernels/cpu/rope.h"
#include "kernels/cuda/gguf_blocks.cuh"
#include "kernels/cuda/packed_format.h"
#include "kernels/device/device_memory.h"
#include "kernels/device/device_runtime.h"
#include "worker/models/host_model_weights.h"
#include "worker/models/weight_declaration.h"
#include "worker/weight_storage.h"

namespace tessera::worker {

class DeviceKernels;  // worker/cuda/device_kernels.h

// One tensor on the device: row-major [experts ×] [rows, cols] (rows = output features);
// data is null for an optional tensor the model lacks. A kDense tensor (norms, biases, conv
// kernels, per-head constants) is also kept in f32 (`values`) for the kernels that read small
// per-layer constants in f32 whatever the compute type (the Gated DeltaNet gates); null when
// uploaded without it (synthetic weights).
// A projection kept packed (UploadOptions::keep_packed) has `packed` set and data null: its GEMM
// is the packed-linear kernel (kernels/cuda/packed_linear.cuh), whose output is the compute type.
struct DeviceWeight {
  const void* data = nullptr;
  const float* values = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t experts = 1;
  std::optional<cuda::PackedLinear> packed;  // kExperts: n = experts * rows
  const float* expert_scales = nullptr;  // packed kExperts: [experts] (NVFP4's), null: none
  // kEmbedding kept as the file's quantized rows (`data` holds them): their format for the
  // embedding lookup; nullopt: `data` is in the compute type.
  std::optional<cuda::GgufFormat> table_format;
  int64_t bytes = 0;  // device bytes of the tensor (codes and scales when packed; data, not values)
  // A tensor-parallel rank's share of a row-parallel projection (HostWeight::partial_sum):
  // Project sums its output over the ranks.
  bool partial_sum = false;

  bool present() const { return data != nullptr || packed.has_value(); }
};

struct WeightUploadOptions {
  // Keeps each projection whose file type has a packed form (Q8_0, Q4_0, Q4_1, Q4_K, NVFP4, MXFP4)
  // and shape (rows % 8, cols % 64; cols % 256 for Q4_K) packed instead of dequantized, and
  // expert stacks likewise (each expert's rows in turn), and an untied embedding table in a
  // quantized type the lookup decodes keeps its GGUF rows (worker/cuda_packed_rule.h); not
  // f32-output projections (WeightSpec::f32_output). Needs a bf16 or f16 compute type; the runner asks for it outside
  // the batch-invariant mode.
  bool keep_packed = false;
  // The model file: the raw blocks of matrices the cpu binding dequantized (Q4_K, Q6_K, F16).
  const gguf::GgufFile* file = nullptr;
  // Set: a dense bf16 matrix, embedding or expert stack stored in a type the device decodes
  // (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K) and without a tensor scale is uploaded as its
  // GGUF rows and dequantized there (kernels/cuda/dequantize.cuh: the same bits as the host's
  // decode and rounding). Null, or another compute type: dequantized on the host.
  DeviceKernels* kernels = nullptr;
  // Reports the upload as a phase in parameters ("uploading weights"); null: none.
  util::LoadProgress* progress = nullptr;
};

struct DeviceModelWeights {
  device::DataType dtype = device::DataType::kBf16;
  std::vector<DeviceWeight> tensors;    // by WeightId
  const float* rope_cos_sin = nullptr;  // RopeTable layout, [rope_positions, rope_dim / 2, 2]
  int rope_positions = 0;
  int64_t bytes = 0;          // device bytes of all of the above
  std::vector<WeightStorage> formats;  // matrices and embeddings, by storage form
  double load_seconds = 0;    // dequantize + convert + upload
  std::vector<device::DeviceMemory> memory;  // backing store

  const DeviceWeight& operator[](WeightId id) const { return tensors.at(static_cast<size_t>(id)); }
  // Adds one matrix or embedding to `formats`.
  void CountStorage(const std::string& format, bool packed, int64_t parameters,
                    int64_t tensor_bytes);
};

// Errors: the runtime's (too little memory names the size), or UNIMPLEMENTED naming a tensor
// type this loader cannot dequantize.
absl::StatusOr<std::unique_ptr<DeviceModelWeights>> UploadModelWeights(
    device::DeviceRuntime& runtime, const WeightDeclaration& declaration,
    const HostModelWeights& weights, const kernels::cpu::RopeTable& rope, device::DataType dtype,
    const WeightUploadOptions& options = {});

}  // namespace tessera::worker
