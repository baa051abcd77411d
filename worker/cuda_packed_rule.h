// Which declared tensors the cuda runner keeps packed (worker/cuda/device_model_weights.h): one
// rule, read by the upload, the synthetic weights and `tessera inspect`. Plain C++ (no device
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
