#include "worker/cuda/dummy_model_weights.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "common/util/status_macros.h"
#include "kernels/cpu/rope.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "worker/cuda_packed_rule.h"
#include "worker/models/rope_params.h"

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

  // An [n, k] weight packed as `scheme`: random code bytes (the bits of random bf16 values) and
  // every scale, min and super-scale byte kDummyScaleByte (see the header).
  absl::StatusOr<cuda::PackedLinear> Packed(cuda::PackedScheme scheme, int n, int k) {
    const int64_t groups = int64_t{n} * (k / cuda::PackedGroupSize(scheme));
    const int64_t code_bytes = n * cuda::PackedRowCodeBytes(scheme, k);
    cuda::PackedLinear w{.scheme = scheme, .n = n, .k = k,
                         .tensor_scale = scheme == cuda::PackedScheme::kNvfp4
                                             ? 1.0f / (3.0f * std::sqrt(static_cast<float>(k)))
                                             : 1.0f};
    TESSERA_ASSIGN_OR_RETURN(const void* codes,
                             FillAs(device::DataType::kBf16, code_bytes / 2,
                                    {.seed = seed_, .stream = next_stream_++, .center = 0.0f,
                                     .scale = 1.0f}));
    w.codes = static_cast<const uint8_t*>(codes);
    TESSERA_ASSIGN_OR_RETURN(w.scales, Bytes(groups * cuda::PackedScaleBytes(scheme), scheme));
    if (cuda::PackedHasMins(scheme)) {
      TESSERA_ASSIGN_OR_RETURN(w.mins, Bytes(groups * cuda::PackedMinBytes(scheme), scheme));
    }
    if (scheme == cuda::PackedScheme::kQ4_K) {
      TESSERA_ASSIGN_OR_RETURN(const uint8_t* super, Bytes(int64_t{n} * (k / 256) * 4, scheme));
      w.super_scales = reinterpret_cast<const uint16_t*>(super);
    }
    return w;
  }

  absl::StatusOr<const uint8_t*> Bytes(int64_t count, cuda::PackedScheme scheme) {
    TESSERA_ASSIGN_OR_RETURN(void* data, Allocate(static_cast<size_t>(count)));
    TESSERA_RETURN_IF_ERROR(runtime_.Fill(data, DummyScaleByte(scheme), count));
    return static_cast<const uint8_t*>(data);
  }

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
// Whether the synthetic weights hold `spec`: every required tensor, and of the optional dense ones
// the q/k/v biases of a shape that has them.
bool SyntheticHas(const WeightSpec& spec, const model::SyntheticModel& model) {
  if (spec.role != WeightRole::kDense || !spec.optional) return true;
  return absl::EndsWith(spec.name, ".bias") && model.qkv_bias;
}

// Which tensors the synthetic weights leave absent: each concatenation (WeightSpec::parts) is
// made when none of its only_without weights is held, and then its parts are absent; else it is.
std::vector<bool> SyntheticAbsent(const WeightDeclaration& declaration,
                                  const model::SyntheticModel& model) {
  std::vector<bool> absent(static_cast<size_t>(declaration.size()), false);
  for (WeightId id = 0; id < declaration.size(); ++id) {
    const WeightSpec& spec = declaration.spec(id);
    if (spec.parts.empty()) continue;
    const bool made = std::none_of(spec.only_without.begin(), spec.only_without.end(),
                                   [&](WeightId other) {
                                     return other != kNoWeight &&
                                            SyntheticHas(declaration.spec(other), model);
                                   });
    if (!made) absent[id] = true;
    for (const WeightId part : spec.parts) absent[part] = absent[part] || made;
  }
  return absent;
}

absl::StatusOr<DeviceWeight> FillTensor(DummyFiller& f, const WeightSpec& spec,
                                        const model::SyntheticModel& model,
                                        std::optional<cuda::PackedScheme> packed) {
  DeviceWeight out{.data = nullptr, .rows = spec.rows(), .cols = spec.cols(),
                   .experts = spec.role == WeightRole::kExperts ? spec.experts() : 1,
                   .packed = std::nullopt, .expert_scales = nullptr, .table_format = std::nullopt,
                   .bytes = 0};
  if (packed && MayKeepPacked(spec) &&
      cuda::PackedShapeError(*packed, spec.rows(), spec.cols()) == nullptr) {
    TESSERA_ASSIGN_OR_RETURN(out.packed, f.Packed(*packed, static_cast<int>(out.experts * spec.rows()),
                                                  static_cast<int>(spec.cols())));
    return out;
  }
  if (spec.role != WeightRole::kDense) {
    TESSERA_ASSIGN_OR_RETURN(out.data, f.Matrix(spec.elements(), spec.cols()));
    return out;
  }
  out.rows = 1;
  out.cols = spec.elements();
  if (spec.optional) {
    if (SyntheticHas(spec, model)) {
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

uint8_t DummyScaleByte(cuda::PackedScheme scheme) {
  switch (scheme) {
    case cuda::PackedScheme::kNvfp4: return 0x38;  // E4M3 1.0 (the tensor scale sets the range)
    case cuda::PackedScheme::kMxfp4: return 0x78;  // E8M0 2^-7
    case cuda::PackedScheme::kQ4_K: return 0x08;   // sc = mn = 8; d = dmin = f16 0x0808
    default: return 0x08;                          // f16 0x0808 = 1.2e-4 (d and m)
  }
}

absl::StatusOr<std::unique_ptr<DeviceModelWeights>> MakeDummyModelWeights(
    device::DeviceRuntime& runtime, DeviceKernels& kernels, const WeightDeclaration& declaration,
    const model::SyntheticModel& model, device::DataType dtype, uint64_t seed,
    std::optional<cuda::PackedScheme> packed) {
  if (packed && dtype == device::DataType::kF32) {
    return absl::InvalidArgumentError("packed weights need a bf16 or f16 compute type");
  }
  const auto start = std::chrono::steady_clock::now();
  const model::ModelConfig& c = model.config;
  auto out = std::make_unique<DeviceModelWeights>();
  out->dtype = dtype;
  DummyFiller f(runtime, kernels, dtype, seed, out.get());
  const std::vector<bool> absent = SyntheticAbsent(declaration, model);
  for (WeightId id = 0; id < declaration.size(); ++id) {
    const WeightSpec& spec = declaration.spec(id);
    if (absent[id]) {
      DeviceWeight none;  // data = nullptr: absent
      none.rows = spec.rows();
      none.cols = spec.cols();
      out->tensors.push_back(none);
      continue;
    }
    const int64_t bytes_before = out->bytes;
    TESSERA_ASSIGN_OR_RETURN(DeviceWeight tensor, FillTensor(f, spec, model, packed));
    tensor.bytes = out->bytes - bytes_before;
    if (spec.role != WeightRole::kDense) {
      out->CountStorage(tensor.packed ? cuda::PackedSchemeName(tensor.packed->scheme)
                                      : device::DataTypeName(dtype),
                        tensor.packed.has_value(), spec.elements(), tensor.bytes);
    }
    out->tensors.push_back(tensor);
  }
  TESSERA_RETURN_IF_ERROR(UploadRope(runtime, f, c, out.get()));
  out->load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace tessera::worker
