#include "worker/cuda/dummy_model_weights.h"

#include <chrono>
#include <cmath>
#include <string>

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
    return FillAs(dtype_, count, {.seed = seed_, .stream = next_stream_++, .center = center,
                                  .scale = scale});
  }

  // A dense tensor in the compute type and, from the same stream (so the same values before
  // rounding), in f32 for the kernels that read small constants in f32.
  absl::Status FillDense(int64_t count, float center, float scale, DeviceWeight* out) {
    const cuda::RandomUniformParams params{.seed = seed_, .stream = next_stream_++,
                                           .center = center, .scale = scale};
    TESSERA_ASSIGN_OR_RETURN(out->data, FillAs(dtype_, count, params));
    TESSERA_ASSIGN_OR_RETURN(const void* values, FillAs(device::DataType::kF32, count, params));
    out->values = static_cast<const float*>(values);
    return absl::OkStatus();
  }

  absl::StatusOr<const void*> FillAs(device::DataType type, int64_t count,
                                     const cuda::RandomUniformParams& params) {
    TESSERA_ASSIGN_OR_RETURN(void* data, Allocate(count * device::DataTypeBytes(type)));
    TESSERA_RETURN_IF_ERROR(kernels_.RandomUniform(type, data, count, params));
    return static_cast<const void*>(data);
  }

  // count values of rows with `cols` columns, in ±1/sqrt(cols).
  absl::StatusOr<const void*> Matrix(int64_t count, int64_t cols) {
    return Fill(count, 0.0f, 1.0f / std::sqrt(static_cast<float>(cols)));
  }
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

// The range of a required dense tensor's synthetic values, by its name.
// The Gated DeltaNet constants are also kept in f32 (the gate kernel reads them so).
struct DenseValues {
  bool known = false;
  float center = 0.0f;
  float scale = 0.0f;
  bool f32_copy = false;
};
DenseValues DenseValuesFor(const std::string& name) {
  if (absl::EndsWith(name, "norm.weight")) return {true, 1.0f, 0.0f, false};  // norms: 1
  if (absl::EndsWith(name, "ssm_a")) return {true, -1.0f, 0.5f, true};  // -exp(A_log) < 0
  if (absl::EndsWith(name, "ssm_dt.bias")) return {true, -2.0f, 1.0f, true};  // decays in (0, 1)
  if (absl::EndsWith(name, "ssm_conv1d.weight")) return {true, 0.0f, 0.5f, true};
  return {};
}

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
  const DenseValues values = DenseValuesFor(spec.name);
  if (!values.known) {
    return absl::UnimplementedError(absl::StrCat("--load-format dummy cannot make '", spec.name,
                                                 "' (no synthetic values for it)"));
  }
  if (values.f32_copy) {
    TESSERA_RETURN_IF_ERROR(f.FillDense(spec.elements(), values.center, values.scale, &out));
  } else {
    TESSERA_ASSIGN_OR_RETURN(out.data, f.Fill(spec.elements(), values.center, values.scale));
  }
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
