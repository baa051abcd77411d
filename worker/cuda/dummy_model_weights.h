// Synthetic weights of a declared model made on the device (`--load-format dummy`, DESIGN.md §5): every
// tensor the model's WeightDeclaration lists for a SyntheticModel's config allocated and filled in place by the random-fill kernel
// (kernels/cuda/random_uniform.cuh), so a GPU benchmark at a real model's size reads no file and
// copies no weight from the host. Only the RoPE cos/sin table (small) is computed on the host
// and uploaded, as UploadModelWeights does.
//
// Values (uniform, one Philox stream per tensor in declaration order, so a seed gives the same
// weights on every device and run): matrices, the embedding table and the output head in
// ±1/sqrt(cols) (an input row of RMS 1 keeps an output RMS of about 1/sqrt(3) through every
// projection, so activations stay finite through many layers); norm weights exactly 1; the
// optional q/k/v biases (when the shape has them) in ±kDummyBiasScale; other optional tensors
// absent. The Gated DeltaNet constants of hybrid shapes: ssm_a in (-1.5, -0.5) (it is
// -exp(A_log)), ssm_dt.bias in (-3, -1), ssm_conv1d in ±0.5, each also in f32
// (DeviceWeight::values) from the same stream.
//
// With a packed scheme (`--dummy-weight-format`), every projection whose shape it accepts
// (WeightUploadOptions' rule: not embeddings, expert stacks or f32-output projections) is made
// packed instead: random code bytes and every scale (and min, super-scale) byte
// DummyScaleByte(scheme), NVFP4's tensor scale 1/(3·sqrt(cols)): weights of about the dense rule's
// size or smaller, for timing what a packed model's step reads.
//
// Ownership: the result owns its device memory; the runtime must outlive it. Loader thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "common/model/synthetic_shapes.h"
#include "kernels/device/device_runtime.h"
#include "worker/cuda/device_kernels.h"
#include "worker/cuda/device_model_weights.h"
#include "worker/models/weight_declaration.h"

namespace tessera::worker {

inline constexpr float kDummyBiasScale = 0.02f;

// Errors: the runtime's (too little memory names the size) or a failed launch. load_seconds
// covers allocation, the fills (waited for) and the RoPE upload.
// UNIMPLEMENTED naming a dense tensor with no synthetic rule (a new model's constant).
absl::StatusOr<std::unique_ptr<DeviceModelWeights>> MakeDummyModelWeights(
    device::DeviceRuntime& runtime, DeviceKernels& kernels, const WeightDeclaration& declaration,
    const model::SyntheticModel& model, device::DataType dtype, uint64_t seed,
    std::optional<cuda::PackedScheme> packed = std::nullopt);

// The byte every scale, min and super-scale of a dummy packed weight holds.
uint8_t DummyScaleByte(cuda::PackedScheme scheme);

}  // namespace tessera::worker
