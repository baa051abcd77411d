#include "worker/cuda/device_llama_weights.h"

#include <chrono>
#include <cstring>
#include <span>

#include "absl/strings/str_cat.h"
#include "common/gguf/dequantize.h"
#include "common/util/half.h"
#include "common/util/status_macros.h"

namespace tessera::worker {
namespace {

using device::DataType;

// Uploads tensors one at a time through a reused host staging buffer.
class Uploader {
 public:
  Uploader(device::DeviceRuntime& runtime, DataType dtype, DeviceLlamaWeights* out)
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

  // A vector that may be absent (empty span -> nullptr).
  absl::StatusOr<const void*> UploadOptional(std::span<const float> values) {
    if (values.empty()) return static_cast<const void*>(nullptr);
    return Upload(values);
  }

  absl::StatusOr<DeviceMatrix> UploadMatrix(const kernels::cpu::WeightView& view,
                                            const char* name) {
    const uint64_t elements = static_cast<uint64_t>(view.rows * view.cols);
    dequantized_.resize(elements);
    const size_t bytes = kernels::cpu::RowBytes(view.format, view.cols) * view.rows;
    absl::Status status = gguf::DequantizeToF32(
        kernels::cpu::ToGgmlType(view.format),
        std::span<const uint8_t>(static_cast<const uint8_t*>(view.data), bytes), elements,
        dequantized_);
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat(name, ": ", status.message()));
    }
    absl::StatusOr<const void*> data = Upload(dequantized_);
    if (!data.ok()) return data.status();
    return DeviceMatrix{.data = *data, .rows = view.rows, .cols = view.cols};
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
  DeviceLlamaWeights* out_;
  std::vector<float> dequantized_;
  std::vector<uint8_t> staging_;
};

absl::Status UploadLayer(Uploader& up, const LlamaLayerWeights& w, DeviceLlamaLayer* out) {
  TESSERA_ASSIGN_OR_RETURN(out->attn_norm, up.Upload(w.attn_norm));
  TESSERA_ASSIGN_OR_RETURN(out->ffn_norm, up.Upload(w.ffn_norm));
  TESSERA_ASSIGN_OR_RETURN(out->bq, up.UploadOptional(w.bq));
  TESSERA_ASSIGN_OR_RETURN(out->bk, up.UploadOptional(w.bk));
  TESSERA_ASSIGN_OR_RETURN(out->bv, up.UploadOptional(w.bv));
  TESSERA_ASSIGN_OR_RETURN(out->q_norm, up.UploadOptional(w.q_norm));
  TESSERA_ASSIGN_OR_RETURN(out->k_norm, up.UploadOptional(w.k_norm));
  TESSERA_ASSIGN_OR_RETURN(out->wq, up.UploadMatrix(w.wq, "attn_q"));
  TESSERA_ASSIGN_OR_RETURN(out->wk, up.UploadMatrix(w.wk, "attn_k"));
  TESSERA_ASSIGN_OR_RETURN(out->wv, up.UploadMatrix(w.wv, "attn_v"));
  TESSERA_ASSIGN_OR_RETURN(out->wo, up.UploadMatrix(w.wo, "attn_output"));
  TESSERA_ASSIGN_OR_RETURN(out->w_gate, up.UploadMatrix(w.w_gate, "ffn_gate"));
  TESSERA_ASSIGN_OR_RETURN(out->w_up, up.UploadMatrix(w.w_up, "ffn_up"));
  TESSERA_ASSIGN_OR_RETURN(out->w_down, up.UploadMatrix(w.w_down, "ffn_down"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceLlamaWeights>> UploadLlamaWeights(
    device::DeviceRuntime& runtime, const LlamaWeights& weights, const kernels::cpu::RopeTable& rope,
    DataType dtype) {
  const auto start = std::chrono::steady_clock::now();
  auto out = std::make_unique<DeviceLlamaWeights>();
  out->dtype = dtype;
  Uploader up(runtime, dtype, out.get());
  TESSERA_ASSIGN_OR_RETURN(out->token_embd, up.UploadMatrix(weights.token_embd, "token_embd"));
  if (weights.output.data == weights.token_embd.data) {
    out->output = out->token_embd;
  } else {
    TESSERA_ASSIGN_OR_RETURN(out->output, up.UploadMatrix(weights.output, "output"));
  }
  TESSERA_ASSIGN_OR_RETURN(out->output_norm, up.Upload(weights.output_norm));
  out->layers.resize(weights.layers.size());
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    if (absl::Status s = UploadLayer(up, weights.layers[l], &out->layers[l]); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("layer ", l, ": ", s.message()));
    }
  }
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
