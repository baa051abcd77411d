#include "worker/cuda/dummy_model_weights.h"

#include <chrono>
#include <cmath>

#include "common/util/status_macros.h"
#include "kernels/cpu/rope.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "worker/cpu/cpu_model_runner.h"

namespace tessera::worker {
namespace {

// Allocates tensors and fills each with its own Philox stream (numbered in call order).
class DummyFiller {
 public:
  DummyFiller(device::DeviceRuntime& runtime, DeviceKernels& kernels, device::DataType dtype,
              uint64_t seed, DeviceModelWeights* out)
      : runtime_(runtime), kernels_(kernels), dtype_(dtype), seed_(seed), out_(out) {}

  absl::StatusOr<const void*> Fill(int64_t count, float center, float scale) {
    TESSERA_ASSIGN_OR_RETURN(void* data, Allocate(count * device::DataTypeBytes(dtype_)));
    TESSERA_RETURN_IF_ERROR(kernels_.RandomUniform(
        dtype_, data, count,
        {.seed = seed_, .stream = next_stream_++, .center = center, .scale = scale}));
    return static_cast<const void*>(data);
  }

  // count values of rows with `cols` columns, in ±1/sqrt(cols).
  absl::StatusOr<const void*> Matrix(int64_t count, int64_t cols) {
    return Fill(count, 0.0f, 1.0f / std::sqrt(static_cast<float>(cols)));
  }
  absl::StatusOr<const void*> Ones(int64_t count) { return Fill(count, 1.0f, 0.0f); }
  absl::StatusOr<const void*> Bias(int64_t count) { return Fill(count, 0.0f, kDummyBiasScale); }

  absl::StatusOr<void*> Allocate(size_t bytes) {
    TESSERA_ASSIGN_OR_RETURN(device::DeviceMemory memory,
                             device::DeviceMemory::Allocate(runtime_, bytes));
    out_->bytes += static_cast<int64_t>(bytes);
    out_->memory.push_back(std::move(memory));
    return out_->memory.back().data();
  }

 private:
  device::DeviceRuntime& runtime_;
  DeviceKernels& kernels_;
  device::DataType dtype_;
  uint64_t seed_;
  DeviceModelWeights* out_;
  uint32_t next_stream_ = 0;
};

// One declared tensor's synthetic values (see the header for the rules).
absl::StatusOr<DeviceWeight> FillTensor(DummyFiller& f, const WeightSpec& spec,
                                        const model::SyntheticModel& model) {
  DeviceWeight out{.data = nullptr, .rows = spec.rows(), .cols = spec.cols(),
                   .experts = spec.role == WeightRole::kExperts ? spec.experts() : 1};
  if (spec.role != WeightRole::kDense) {
    TESSERA_ASSIGN_OR_RETURN(out.data, f.Matrix(spec.elements(), spec.cols()));
    return out;
  }
  out.rows = 1;
  out.cols = spec.elements();
  const bool bias = absl::EndsWith(spec.name, ".bias");
  if (spec.optional) {
    if (bias && model.qkv_bias) {
      TESSERA_ASSIGN_OR_RETURN(out.data, f.Bias(spec.elements()));
    }
    return out;
  }
  if (!absl::EndsWith(spec.name, "norm.weight")) {
    return absl::UnimplementedError(absl::StrCat(
        "--load-format dummy cannot make '", spec.name, "' (only matrices, norms and biases)"));
  }
  TESSERA_ASSIGN_OR_RETURN(out.data, f.Ones(spec.elements()));
  return out;
}

// The host-computed cos/sin table, uploaded once (the staging copy must finish before it goes).
absl::Status UploadRope(device::DeviceRuntime& runtime, DummyFiller& f,
                        const model::ModelConfig& config, DeviceModelWeights* out) {
  const kernels::cpu::RopeTable rope(RopeParamsForModel(config, {}), config.context_length);
  const size_t bytes =
      static_cast<size_t>(rope.max_positions()) * rope.rope_dim() * sizeof(float);
  TESSERA_ASSIGN_OR_RETURN(void* table, f.Allocate(bytes));
  TESSERA_RETURN_IF_ERROR(runtime.CopyToDevice(table, rope.CosSin(0), bytes));
  out->rope_cos_sin = static_cast<const float*>(table);
  out->rope_positions = static_cast<int>(rope.max_positions());
  return runtime.Synchronize();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceModelWeights>> MakeDummyModelWeights(
    device::DeviceRuntime& runtime, DeviceKernels& kernels, const WeightDeclaration& declaration,
    const model::SyntheticModel& model, device::DataType dtype, uint64_t seed) {
  const auto start = std::chrono::steady_clock::now();
  const model::ModelConfig& c = model.config;
  auto out = std::make_unique<DeviceModelWeights>();
  out->dtype = dtype;
  DummyFiller f(runtime, kernels, dtype, seed, out.get());
  for (const WeightSpec& spec : declaration.specs()) {
    TESSERA_ASSIGN_OR_RETURN(const DeviceWeight tensor, FillTensor(f, spec, model));
    out->tensors.push_back(tensor);
  }
  TESSERA_RETURN_IF_ERROR(UploadRope(runtime, f, c, out.get()));
  out->load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace tessera::worker
