#include "worker/cuda/dummy_llama_weights.h"

#include <chrono>
#include <cmath>

#include "common/util/status_macros.h"
#include "kernels/cpu/rope.h"
#include "worker/cpu/cpu_llama_runner.h"

namespace tessera::worker {
namespace {

// Allocates tensors and fills each with its own Philox stream (numbered in call order).
class DummyFiller {
 public:
  DummyFiller(device::DeviceRuntime& runtime, DeviceKernels& kernels, device::DataType dtype,
              uint64_t seed, DeviceLlamaWeights* out)
      : runtime_(runtime), kernels_(kernels), dtype_(dtype), seed_(seed), out_(out) {}

  absl::StatusOr<const void*> Fill(int64_t count, float center, float scale) {
    TESSERA_ASSIGN_OR_RETURN(void* data, Allocate(count * device::DataTypeBytes(dtype_)));
    TESSERA_RETURN_IF_ERROR(kernels_.RandomUniform(
        dtype_, data, count,
        {.seed = seed_, .stream = next_stream_++, .center = center, .scale = scale}));
    return static_cast<const void*>(data);
  }

  // [rows, cols] in ±1/sqrt(cols).
  absl::StatusOr<DeviceMatrix> Matrix(int64_t rows, int64_t cols) {
    TESSERA_ASSIGN_OR_RETURN(const void* data,
                             Fill(rows * cols, 0.0f, 1.0f / std::sqrt(static_cast<float>(cols))));
    return DeviceMatrix{.data = data, .rows = rows, .cols = cols};
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
  DeviceLlamaWeights* out_;
  uint32_t next_stream_ = 0;
};

absl::Status FillLayer(DummyFiller& f, const model::SyntheticModel& model,
                       DeviceLlamaLayer* out) {
  const model::ModelConfig& c = model.config;
  const int64_t hidden = c.hidden_size, ffn = c.ffn_size;
  const int64_t q_width = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv_width = int64_t{c.num_kv_heads} * c.head_dim;
  TESSERA_ASSIGN_OR_RETURN(out->attn_norm, f.Ones(hidden));
  TESSERA_ASSIGN_OR_RETURN(out->ffn_norm, f.Ones(hidden));
  if (model.qkv_bias) {
    TESSERA_ASSIGN_OR_RETURN(out->bq, f.Bias(q_width));
    TESSERA_ASSIGN_OR_RETURN(out->bk, f.Bias(kv_width));
    TESSERA_ASSIGN_OR_RETURN(out->bv, f.Bias(kv_width));
  }
  TESSERA_ASSIGN_OR_RETURN(out->wq, f.Matrix(q_width, hidden));
  TESSERA_ASSIGN_OR_RETURN(out->wk, f.Matrix(kv_width, hidden));
  TESSERA_ASSIGN_OR_RETURN(out->wv, f.Matrix(kv_width, hidden));
  TESSERA_ASSIGN_OR_RETURN(out->wo, f.Matrix(hidden, q_width));
  TESSERA_ASSIGN_OR_RETURN(out->w_gate, f.Matrix(ffn, hidden));
  TESSERA_ASSIGN_OR_RETURN(out->w_up, f.Matrix(ffn, hidden));
  TESSERA_ASSIGN_OR_RETURN(out->w_down, f.Matrix(hidden, ffn));
  return absl::OkStatus();
}

// The host-computed cos/sin table, uploaded once (the staging copy must finish before it goes).
absl::Status UploadRope(device::DeviceRuntime& runtime, DummyFiller& f,
                        const model::ModelConfig& config, DeviceLlamaWeights* out) {
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

absl::StatusOr<std::unique_ptr<DeviceLlamaWeights>> MakeDummyLlamaWeights(
    device::DeviceRuntime& runtime, DeviceKernels& kernels, const model::SyntheticModel& model,
    device::DataType dtype, uint64_t seed) {
  const auto start = std::chrono::steady_clock::now();
  const model::ModelConfig& c = model.config;
  auto out = std::make_unique<DeviceLlamaWeights>();
  out->dtype = dtype;
  DummyFiller f(runtime, kernels, dtype, seed, out.get());
  TESSERA_ASSIGN_OR_RETURN(out->token_embd, f.Matrix(c.vocab_size, c.hidden_size));
  out->output = out->token_embd;
  if (!c.tied_embeddings) {
    TESSERA_ASSIGN_OR_RETURN(out->output, f.Matrix(c.vocab_size, c.hidden_size));
  }
  TESSERA_ASSIGN_OR_RETURN(out->output_norm, f.Ones(c.hidden_size));
  out->layers.resize(c.num_layers);
  for (DeviceLlamaLayer& layer : out->layers) {
    TESSERA_RETURN_IF_ERROR(FillLayer(f, model, &layer));
  }
  TESSERA_RETURN_IF_ERROR(UploadRope(runtime, f, c, out.get()));
  out->load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace tessera::worker
