#include "worker/cuda/device_model_weights.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <span>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/gguf/dequantize.h"
#include "common/util/check.h"
#include "common/util/half.h"
#include "common/util/status_macros.h"
#include "kernels/cuda/packed_weight.h"
#include "worker/cuda/device_kernels.h"
#include "worker/cuda_packed_rule.h"

namespace tessera::worker {
namespace {

using device::DataType;

// Uploads tensors one at a time through a reused host staging buffer.
class Uploader {
 public:
  Uploader(device::DeviceRuntime& runtime, DataType dtype, DeviceModelWeights* out)
      : runtime_(runtime), dtype_(dtype), out_(out) {}

  // f32 values -> the compute type -> a new device allocation.
  absl::StatusOr<const void*> Upload(std::span<const float> values) {
    const size_t element_bytes = device::DataTypeBytes(dtype_);
    staging_.resize(values.size() * element_bytes);
    ConvertTo(values, staging_.data());
    return UploadBytes(staging_.data(), staging_.size());
  }

  absl::StatusOr<const void*> UploadBytes(const void* bytes, size_t size) {
    absl::StatusOr<device::DeviceMemory> memory =
        device::DeviceMemory::Allocate(runtime_, size);
    if (!memory.ok()) return memory.status();
    if (absl::Status s = runtime_.CopyToDevice(memory->data(), bytes, size); !s.ok()) return s;
    // The staging buffer is reused by the next tensor: the copy must have executed.
    if (absl::Status s = runtime_.Synchronize(); !s.ok()) return s;
    out_->bytes += static_cast<int64_t>(size);
    out_->memory.push_back(*std::move(memory));
    return static_cast<const void*>(out_->memory.back().data());
  }

  // GGUF rows of `format` uploaded as they are and decoded to bf16 by `kernels` into a new
  // allocation; the rows' upload is freed once the decode has run.
  absl::StatusOr<const void*> UploadDecodedOnDevice(DeviceKernels& kernels, cuda::GgufFormat format,
                                                    std::span<const uint8_t> rows_bytes,
                                                    int64_t rows, int64_t cols) {
    TESSERA_ASSIGN_OR_RETURN(device::DeviceMemory encoded,
                             device::DeviceMemory::Allocate(runtime_, rows_bytes.size()));
    TESSERA_RETURN_IF_ERROR(
        runtime_.CopyToDevice(encoded.data(), rows_bytes.data(), rows_bytes.size()));
    const size_t size = static_cast<size_t>(rows * cols) * sizeof(uint16_t);
    TESSERA_ASSIGN_OR_RETURN(device::DeviceMemory decoded,
                             device::DeviceMemory::Allocate(runtime_, size));
    TESSERA_RETURN_IF_ERROR(kernels.DequantizeToBf16(format, encoded.data(), decoded.data(), rows, cols));
    TESSERA_RETURN_IF_ERROR(runtime_.Synchronize());
    out_->bytes += static_cast<int64_t>(size);
    out_->memory.push_back(std::move(decoded));
    return static_cast<const void*>(out_->memory.back().data());
  }

  // A matrix or an expert stack ([experts * rows, cols] in one format), dequantized and
  // multiplied by its tensor scales (NVFP4's sidecar: one for a matrix, one per expert for a
  // stack, each over its equal share of the rows; none: 1).
  absl::StatusOr<const void*> UploadMatmul(kernels::cpu::WeightFormat format, const void* data,
                                           int64_t rows, int64_t cols, const std::string& name,
                                           std::span<const float> tensor_scales = {}) {
    const uint64_t elements = static_cast<uint64_t>(rows * cols);
    dequantized_.resize(elements);
    const size_t bytes = kernels::cpu::RowBytes(format, cols) * rows;
    absl::Status status = gguf::DequantizeToF32(
        kernels::cpu::ToGgmlType(format),
        std::span<const uint8_t>(static_cast<const uint8_t*>(data), bytes), elements,
        dequantized_);
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat(name, ": ", status.message()));
    }
    const size_t share = tensor_scales.empty() ? 0 : elements / tensor_scales.size();
    for (size_t i = 0; i < tensor_scales.size(); ++i) {
      if (tensor_scales[i] == 1.0f) continue;
      for (size_t j = i * share; j < (i + 1) * share; ++j) dequantized_[j] *= tensor_scales[i];
    }
    return Upload(dequantized_);
  }

 private:
  void ConvertTo(std::span<const float> values, uint8_t* out) const {
    if (dtype_ == DataType::kF32) {
      std::memcpy(out, values.data(), values.size() * sizeof(float));
      return;
    }
    auto* halves = reinterpret_cast<uint16_t*>(out);
    for (size_t i = 0; i < values.size(); ++i) {
      halves[i] = dtype_ == DataType::kBf16 ? util::FloatToBf16(values[i])
                                            : util::FloatToHalf(values[i]);
    }
  }

  device::DeviceRuntime& runtime_;
  DataType dtype_;
  DeviceModelWeights* out_;
  std::vector<float> dequantized_;
  std::vector<uint8_t> staging_;
};

// The raw GGUF blocks of a matrix and their type: the cpu binding's view when it kept the file's
// format, else the file's tensor (a format the cpu kernels do not read, e.g. Q4_K).
struct RawMatrix {
  gguf::GgmlType type = gguf::GgmlType::kF32;
  std::span<const uint8_t> data;
};
// `given` (a concatenation's rows, built by the caller) wins when set.
std::optional<RawMatrix> RawMatrixOf(const WeightSpec& spec, const HostWeight& w,
                                     const gguf::GgufFile* file,
                                     const RawMatrix* given = nullptr) {
  if (given != nullptr) return *given;
  const bool stack = spec.role == WeightRole::kExperts;
  const kernels::cpu::WeightFormat format = stack ? w.experts.format : w.matrix.format;
  if (format != kernels::cpu::WeightFormat::kF32) {
    const size_t bytes = kernels::cpu::RowBytes(format, spec.cols()) * PackedMatrixRows(spec);
    return RawMatrix{kernels::cpu::ToGgmlType(format),
                     {static_cast<const uint8_t*>(stack ? w.experts.data : w.matrix.data), bytes}};
  }
  const gguf::GgufTensorInfo* info = file != nullptr ? file->FindTensor(spec.name) : nullptr;
  if (info == nullptr) return std::nullopt;
  return RawMatrix{info->type, file->TensorData(*info)};
}

// The packed form of a projection or expert stack (all experts' rows as one matrix), or nullopt
// when it has none (format, shape, role, or a scale byte the planar layout cannot hold: then it
// is dequantized like any other tensor). A stack's per-expert scales are uploaded beside it.
std::optional<cuda::PackedWeight> PackedFormOf(const WeightSpec& spec, const HostWeight& w,
                                               const WeightUploadOptions& options,
                                               const RawMatrix* given) {
  if (!options.keep_packed || !MayKeepPacked(spec)) return std::nullopt;
  const std::optional<RawMatrix> raw = RawMatrixOf(spec, w, options.file, given);
  if (!raw || !CudaPackedScheme(spec, raw->type)) return std::nullopt;
  absl::StatusOr<cuda::PackedWeight> packed = cuda::PackGgufRows(
      raw->type, raw->data, static_cast<int>(PackedMatrixRows(spec)), static_cast<int>(spec.cols()));
  if (!packed.ok()) return std::nullopt;
  packed->tensor_scale = spec.role == WeightRole::kExperts ? 1.0f : w.tensor_scale;
  return *std::move(packed);
}

// The device decoders' format of a GGUF type (kernels/cuda/gguf_blocks.cuh), or nullopt.
std::optional<cuda::GgufFormat> DeviceGgufFormat(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kF32: return cuda::GgufFormat::kF32;
    case gguf::GgmlType::kF16: return cuda::GgufFormat::kF16;
    case gguf::GgmlType::kBF16: return cuda::GgufFormat::kBF16;
    case gguf::GgmlType::kQ8_0: return cuda::GgufFormat::kQ8_0;
    case gguf::GgmlType::kQ4_0: return cuda::GgufFormat::kQ4_0;
    case gguf::GgmlType::kQ4_1: return cuda::GgufFormat::kQ4_1;
    case gguf::GgmlType::kQ4_K: return cuda::GgufFormat::kQ4_K;
    case gguf::GgmlType::kQ6_K: return cuda::GgufFormat::kQ6_K;
    default: return std::nullopt;
  }
}

// An embedding table kept in its quantized GGUF rows: their type, or nullopt when the rule or
// the file says otherwise (then it is dequantized like any other tensor).
absl::StatusOr<std::optional<gguf::GgmlType>> UploadEmbeddingRows(
    Uploader& up, const WeightSpec& spec, const HostWeight& w, const WeightUploadOptions& options,
    DeviceWeight* out) {
  const std::optional<RawMatrix> raw =
      options.keep_packed ? RawMatrixOf(spec, w, options.file) : std::nullopt;
  if (!raw || !KeepsEmbeddingRows(spec, raw->type)) return std::optional<gguf::GgmlType>();
  TESSERA_ASSIGN_OR_RETURN(out->data, up.UploadBytes(raw->data.data(), raw->data.size()));
  out->table_format = DeviceGgufFormat(raw->type);
  return std::optional<gguf::GgmlType>(raw->type);
}

// A dense matrix, embedding or expert stack decoded on the device (WeightUploadOptions::kernels),
// or null when the host does it: another compute type, a tensor scale to fold, or a type the
// device does not decode.
absl::StatusOr<const void*> UploadDecodedOnDevice(Uploader& up, const WeightSpec& spec,
                                                  const HostWeight& w,
                                                  const WeightUploadOptions& options,
                                                  DataType dtype, const RawMatrix* given) {
  const bool scaled = w.tensor_scale != 1.0f || !w.expert_scales.empty();
  if (options.kernels == nullptr || dtype != DataType::kBf16 || scaled) return nullptr;
  const std::optional<RawMatrix> raw = RawMatrixOf(spec, w, options.file, given);
  const std::optional<cuda::GgufFormat> format =
      raw ? DeviceGgufFormat(raw->type) : std::nullopt;
  if (!format) return nullptr;
  return up.UploadDecodedOnDevice(*options.kernels, *format, raw->data, PackedMatrixRows(spec),
                                  spec.cols());
}

absl::StatusOr<cuda::PackedLinear> UploadPacked(Uploader& up, const cuda::PackedWeight& w) {
  cuda::PackedLinear out{.scheme = w.scheme, .n = w.n, .k = w.k, .tensor_scale = w.tensor_scale};
  TESSERA_ASSIGN_OR_RETURN(const void* codes, up.UploadBytes(w.codes.data(), w.codes.size()));
  TESSERA_ASSIGN_OR_RETURN(const void* scales, up.UploadBytes(w.scales.data(), w.scales.size()));
  out.codes = static_cast<const uint8_t*>(codes);
  out.scales = static_cast<const uint8_t*>(scales);
  if (!w.mins.empty()) {
    TESSERA_ASSIGN_OR_RETURN(const void* mins, up.UploadBytes(w.mins.data(), w.mins.size()));
    out.mins = static_cast<const uint8_t*>(mins);
  }
  if (!w.super_scales.empty()) {
    TESSERA_ASSIGN_OR_RETURN(const void* super,
                             up.UploadBytes(w.super_scales.data(), w.super_scales.size() * 2));
    out.super_scales = static_cast<const uint16_t*>(super);
  }
  return out;
}

absl::StatusOr<DeviceWeight> UploadTensor(Uploader& up, const WeightSpec& spec,
                                          const HostWeight& w, const WeightUploadOptions& options,
                                          DeviceModelWeights& model,
                                          const RawMatrix* given = nullptr) {
  DeviceWeight out{.data = nullptr, .rows = spec.rows(), .cols = spec.cols(),
                   .experts = spec.role == WeightRole::kExperts ? spec.experts() : 1,
                   .packed = std::nullopt, .expert_scales = nullptr, .table_format = std::nullopt,
                   .bytes = 0};
  if (!w.present) return out;
  out.partial_sum = w.partial_sum;
  const int64_t bytes_before = model.bytes;
  const int64_t parameters = spec.elements();
  if (std::optional<cuda::PackedWeight> packed = PackedFormOf(spec, w, options, given)) {
    TESSERA_ASSIGN_OR_RETURN(out.packed, UploadPacked(up, *packed));
    if (!w.expert_scales.empty()) {
      TESSERA_ASSIGN_OR_RETURN(const void* scales,
                               up.UploadBytes(w.expert_scales.data(),
                                              w.expert_scales.size() * sizeof(float)));
      out.expert_scales = static_cast<const float*>(scales);
    }
    out.bytes = model.bytes - bytes_before;
    model.CountStorage(cuda::PackedSchemeName(packed->scheme), true, parameters, out.bytes);
    return out;
  }
  TESSERA_ASSIGN_OR_RETURN(const std::optional<gguf::GgmlType> rows_kept,
                           UploadEmbeddingRows(up, spec, w, options, &out));
  if (rows_kept) {
    out.bytes = model.bytes - bytes_before;
    model.CountStorage(absl::AsciiStrToLower(gguf::GgmlTypeName(*rows_kept)), true, parameters,
                       out.bytes);
    return out;
  }
  if (spec.role == WeightRole::kDense) {
    out.rows = 1;
    out.cols = spec.elements();
    TESSERA_ASSIGN_OR_RETURN(out.data, up.Upload(w.values));
    TESSERA_ASSIGN_OR_RETURN(const void* values,
                             up.UploadBytes(w.values.data(), w.values.size() * sizeof(float)));
    out.values = static_cast<const float*>(values);
    out.bytes = parameters * static_cast<int64_t>(device::DataTypeBytes(model.dtype));
    return out;
  }
  TESSERA_ASSIGN_OR_RETURN(out.data,
                           UploadDecodedOnDevice(up, spec, w, options, model.dtype, given));
  // A concatenation is uploaded only from its rows (ConcatenatedRows checked that it can be).
  TESSERA_CHECK(given == nullptr || out.data != nullptr,
                "UploadTensor: a concatenation with neither a packed nor a device-decoded form");
  if (out.data == nullptr && spec.role == WeightRole::kExperts) {
    TESSERA_ASSIGN_OR_RETURN(out.data, up.UploadMatmul(w.experts.format, w.experts.data,
                                                       out.experts * out.rows, out.cols,
                                                       spec.name, w.expert_scales));
  } else if (out.data == nullptr) {
    TESSERA_ASSIGN_OR_RETURN(out.data, up.UploadMatmul(w.matrix.format, w.matrix.data, out.rows,
                                                       out.cols, spec.name,
                                                       std::span(&w.tensor_scale, 1)));
  }
  out.bytes = parameters * static_cast<int64_t>(device::DataTypeBytes(model.dtype));
  model.CountStorage(device::DataTypeName(model.dtype), false, parameters, out.bytes);
  return out;
}

// The rows of concatenation `spec` (WeightSpec::parts) as one raw GGUF matrix in `storage`, with
// the parts' common tensor scale in `scale`, when every part is present in the same stored type
// and scale and the result has a form uploaded from raw rows alone (packed, or decoded on the
// device); nullopt otherwise (the parts are then uploaded as they are).
std::optional<RawMatrix> ConcatenatedRows(const WeightDeclaration& declaration,
                                          const WeightSpec& spec, const HostModelWeights& weights,
                                          const WeightUploadOptions& options, DataType dtype,
                                          std::vector<uint8_t>* storage, float* scale) {
  for (const WeightId other : spec.only_without) {
    if (other != kNoWeight && weights[other].present) return std::nullopt;
  }
  std::optional<gguf::GgmlType> type;
  storage->clear();
  for (const WeightId part : spec.parts) {
    const HostWeight& w = weights[part];
    if (w.partial_sum) return std::nullopt;  // each part's output is summed over ranks on its own
    const std::optional<RawMatrix> raw =
        w.present ? RawMatrixOf(declaration.spec(part), w, options.file) : std::nullopt;
    if (!raw || (type && (*type != raw->type || *scale != w.tensor_scale))) return std::nullopt;
    type = raw->type;
    *scale = w.tensor_scale;
    storage->insert(storage->end(), raw->data.begin(), raw->data.end());
  }
  const bool packs = options.keep_packed && MayKeepPacked(spec) && CudaPackedScheme(spec, *type);
  const bool decodes = options.kernels != nullptr && dtype == DataType::kBf16 && *scale == 1.0f &&
                       DeviceGgufFormat(*type).has_value();
  if (!packs && !decodes) return std::nullopt;
  return RawMatrix{*type, *storage};
}

// Uploads every concatenation that ConcatenatedRows can build into `fused` (by WeightId) and
// marks its parts in `absorbed`.
absl::Status UploadConcatenations(Uploader& up, const WeightDeclaration& declaration,
                                  const HostModelWeights& weights,
                                  const WeightUploadOptions& options, DeviceModelWeights& model,
                                  std::vector<std::optional<DeviceWeight>>* fused,
                                  std::vector<bool>* absorbed) {
  std::vector<uint8_t> storage;
  for (WeightId id = 0; id < declaration.size(); ++id) {
    const WeightSpec& spec = declaration.spec(id);
    if (spec.parts.empty()) continue;
    HostWeight whole;
    whole.role = WeightRole::kMatrix;
    whole.present = true;
    const std::optional<RawMatrix> raw = ConcatenatedRows(declaration, spec, weights, options,
                                                          model.dtype, &storage,
                                                          &whole.tensor_scale);
    if (!raw) continue;
    TESSERA_ASSIGN_OR_RETURN((*fused)[id], UploadTensor(up, spec, whole, options, model, &*raw));
    for (const WeightId part : spec.parts) (*absorbed)[part] = true;
  }
  return absl::OkStatus();
}

// The parameters of every tensor the file has (a concatenation counts through its parts): the
// upload's progress total.
int64_t PresentParameters(const WeightDeclaration& declaration,
                          const HostModelWeights& weights) {
  int64_t total = 0;
  for (WeightId id = 0; id < declaration.size(); ++id) {
    if (declaration.spec(id).parts.empty() && weights[id].present) {
      total += declaration.spec(id).elements();
    }
  }
  return total;
}

}  // namespace

void DeviceModelWeights::CountStorage(const std::string& format, bool packed, int64_t parameters,
                                      int64_t tensor_bytes) {
  auto it = std::find_if(formats.begin(), formats.end(), [&](const WeightStorage& s) {
    return s.format == format && s.packed == packed;
  });
  if (it == formats.end()) it = formats.insert(formats.end(), {.format = format, .packed = packed});
  ++it->tensors;
  it->parameters += parameters;
  it->bytes += tensor_bytes;
}

absl::StatusOr<std::unique_ptr<DeviceModelWeights>> UploadModelWeights(
    device::DeviceRuntime& runtime, const WeightDeclaration& declaration,
    const HostModelWeights& weights, const kernels::cpu::RopeTable& rope, DataType dtype,
    const WeightUploadOptions& options) {
  if (options.keep_packed && dtype == DataType::kF32) {
    return absl::InvalidArgumentError("packed weights need a bf16 or f16 compute type");
  }
  const auto start = std::chrono::steady_clock::now();
  auto out = std::make_unique<DeviceModelWeights>();
  out->dtype = dtype;
  Uploader up(runtime, dtype, out.get());
  std::vector<std::optional<DeviceWeight>> fused(static_cast<size_t>(declaration.size()));
  std::vector<bool> absorbed(static_cast<size_t>(declaration.size()), false);
  if (options.progress != nullptr) {
    options.progress->Begin("uploading weights", PresentParameters(declaration, weights),
                            util::LoadProgress::Unit::kParameters);
  }
  TESSERA_RETURN_IF_ERROR(
      UploadConcatenations(up, declaration, weights, options, *out, &fused, &absorbed));
  for (WeightId id = 0; id < declaration.size(); ++id) {
    const WeightSpec& spec = declaration.spec(id);
    if (fused[id]) {
      out->tensors.push_back(*fused[id]);
      continue;
    }
    // An absorbed part, or a concatenation left to its parts: absent.
    const bool absent = absorbed[id] || !spec.parts.empty();
    HostWeight none;  // present = false
    none.role = spec.role;
    TESSERA_ASSIGN_OR_RETURN(
        const DeviceWeight tensor,
        UploadTensor(up, spec, absent ? none : weights[id], options, *out));
    out->tensors.push_back(tensor);
    // A part absorbed into a concatenation is counted here too, once its whole is on the device.
    if (options.progress != nullptr && spec.parts.empty() && weights[id].present) {
      options.progress->Advance(spec.elements());
    }
  }
  if (options.progress != nullptr) options.progress->End();
  out->rope_positions = static_cast<int>(rope.max_positions());
  const size_t rope_bytes = static_cast<size_t>(rope.max_positions()) * rope.rope_dim() *
                            sizeof(float);
  const void* rope_table = nullptr;
  TESSERA_ASSIGN_OR_RETURN(rope_table, up.UploadBytes(rope.CosSin(0), rope_bytes));
  out->rope_cos_sin = static_cast<const float*>(rope_table);
  out->load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace tessera::worker
