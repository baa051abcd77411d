// Which declared tensors the cuda runner keeps packed (worker/cuda/device_model_weights.h): one
// rule, read by the upload, the synthetic weights and `tessera inspect`; and which embedding
// tables stay in their quantized GGUF rows. Plain C++ (no device
// code), so builds without the device backends can report it. Pure functions.
#pragma once

#include <optional>

#include "common/gguf/ggml_type.h"
#include "kernels/cuda/packed_format.h"
#include "kernels/cuda/packed_weight.h"
#include "worker/models/weight_declaration.h"

namespace tessera::worker {

// A projection (kMatrix) or expert stack (kExperts) the model does not read in f32
// (WeightSpec::f32_output): embeddings, the logits head and MoE routers stay dense.
inline bool MayKeepPacked(const WeightSpec& spec) {
  return (spec.role == WeightRole::kMatrix || spec.role == WeightRole::kExperts) &&
         !spec.f32_output;
}

// Rows of the matrix a packed tensor is: an expert stack's experts one after another.
inline int64_t PackedMatrixRows(const WeightSpec& spec) {
  return spec.role == WeightRole::kExperts ? spec.experts() * spec.rows() : spec.rows();
}

// An untied token embedding table (kEmbedding) in a quantized type the device's embedding
// lookup decodes (kernels/cuda/embedding.cuh: Q8_0, Q4_0, Q4_1, Q4_K, Q6_K) stays in the file's
// rows on the device; a tied one is also the logits head and is dense.
inline bool KeepsEmbeddingRows(const WeightSpec& spec, gguf::GgmlType type) {
  if (spec.role != WeightRole::kEmbedding) return false;
  switch (type) {
    case gguf::GgmlType::kQ8_0:
    case gguf::GgmlType::kQ4_0:
    case gguf::GgmlType::kQ4_1:
    case gguf::GgmlType::kQ4_K:
    case gguf::GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

// `spec`'s packed scheme when stored as `type` (a scheme of the type, a shape PackedShapeError
// accepts: for an expert stack, each expert's matrix), or nullopt.
inline std::optional<cuda::PackedScheme> CudaPackedScheme(const WeightSpec& spec,
                                                          gguf::GgmlType type) {
  if (!MayKeepPacked(spec)) return std::nullopt;
  const std::optional<cuda::PackedScheme> scheme = cuda::PackedSchemeOfGgufType(type);
  if (!scheme || cuda::PackedShapeError(*scheme, spec.rows(), spec.cols()) != nullptr) {
    return std::nullopt;
  }
  return scheme;
}

}  // namespace tessera::worker
