#include "worker/cuda/device_llama_ops.h"

#include <algorithm>
#include <cmath>

#include "common/util/check.h"
#include "common/util/status_macros.h"

namespace tessera::worker {
namespace {

using device::DataType;

bool InPlaceCapable(LlamaActivation act) {
  return act == LlamaActivation::kQ || act == LlamaActivation::kK ||
         act == LlamaActivation::kFinal;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceLlamaOps>> DeviceLlamaOps::Create(
    device::DeviceRuntime& runtime, DeviceKernels& kernels, const model::ModelConfig& config,
    const DeviceLlamaWeights& weights, const DeviceKvPools& kv, const DeviceOpsOptions& options) {
  std::unique_ptr<DeviceLlamaOps> ops(
      new DeviceLlamaOps(runtime, kernels, config, weights, kv, options));
  TESSERA_RETURN_IF_ERROR(ops->AllocateActivations());
  return ops;
}

DeviceLlamaOps::DeviceLlamaOps(device::DeviceRuntime& runtime, DeviceKernels& kernels,
                               const model::ModelConfig& config,
                               const DeviceLlamaWeights& weights, const DeviceKvPools& kv,
                               const DeviceOpsOptions& options)
    : runtime_(runtime),
      kernels_(kernels),
      config_(config),
      weights_(weights),
      kv_(kv),
      options_(options),
      dtype_(weights.dtype) {}

int DeviceLlamaOps::Width(Act act) const {
  const int q_width = config_.num_heads * config_.head_dim;
  const int kv_width = config_.num_kv_heads * config_.head_dim;
  switch (act) {
    case Act::kQ:
    case Act::kAttention: return q_width;
    case Act::kK:
    case Act::kV: return kv_width;
    case Act::kGate:
    case Act::kUp: return config_.ffn_size;
    case Act::kLogits: return config_.vocab_size;
    default: return config_.hidden_size;
  }
}

size_t DeviceLlamaOps::ElementBytes(Act act) const {
  return act == Act::kLogits ? sizeof(float) : device::DataTypeBytes(dtype_);
}

absl::Status DeviceLlamaOps::AllocateActivations() {
  const size_t elem = device::DataTypeBytes(dtype_);
  const size_t in_place_bytes =
      std::max(size_t(options_.max_tokens) * Width(Act::kQ) * elem,
               size_t(options_.max_rows) * Width(Act::kFinal) * elem);
  for (int a = 0; a <= kNumActs; ++a) {  // the last one is the spare
    const Act act = static_cast<Act>(std::min(a, kNumActs - 1));
    const bool row_act = act == Act::kFinal || act == Act::kLogits;
    size_t bytes = size_t(row_act ? options_.max_rows : options_.max_tokens) * Width(act) *
                   ElementBytes(act);
    if (a == kNumActs || InPlaceCapable(act)) bytes = std::max(bytes, in_place_bytes);
    TESSERA_ASSIGN_OR_RETURN(device::DeviceMemory memory,
                             device::DeviceMemory::Allocate(runtime_, std::max<size_t>(bytes, 16)));
    activation_bytes_ += static_cast<int64_t>(memory.bytes());
    buffers_.push_back(std::move(memory));
  }
  cuda::PagedDecodeParams widest{.num_seqs = options_.max_rows,
                                 .num_heads = config_.num_heads,
                                 .num_kv_heads = config_.num_kv_heads,
                                 .block_size = kv_.block_size,
                                 .max_blocks_per_seq = 1,
                                 .max_context_len = config_.context_length,
                                 .scale = 1.0f,
                                 .num_sms = options_.num_sms,
                                 .partition_size = options_.decode_partition};
  // The most any decode launch can need: the widest batch at the longest context, and the
  // smallest batch (most partitions per sequence) scaled to the widest batch.
  size_t workspace_floats = 0;
  for (int seqs = 1; seqs <= options_.max_rows; seqs *= 2) {
    widest.num_seqs = seqs;
    workspace_floats = std::max(workspace_floats,
                                cuda::PagedDecodeWorkspaceFloats(widest, config_.head_dim) *
                                    (options_.max_rows + seqs - 1) / seqs);
  }
  TESSERA_ASSIGN_OR_RETURN(decode_workspace_,
                           device::DeviceMemory::Allocate(
                               runtime_, std::max<size_t>(workspace_floats, 4) * sizeof(float)));
  activation_bytes_ += static_cast<int64_t>(decode_workspace_.bytes());
  return absl::OkStatus();
}

void DeviceLlamaOps::BeginStep(const DeviceStepInputs& inputs,
                               const DeviceStepAttention& attention) {
  inputs_ = &inputs;
  attention_ = attention;
  status_ = absl::OkStatus();
  for (int a = 0; a < kNumActs; ++a) slot_of_[a] = a;
  spare_ = kNumActs;
}

int DeviceLlamaOps::Rows(Act act) const {
  const StepShape& shape = inputs_->shape();
  return act == Act::kFinal || act == Act::kLogits ? shape.num_rows : shape.num_tokens;
}

void* DeviceLlamaOps::Buffer(Act act) const {
  return buffers_[slot_of_[static_cast<int>(act)]].data();
}

const float* DeviceLlamaOps::logits() const {
  return static_cast<const float*>(Buffer(Act::kLogits));
}

void DeviceLlamaOps::Check(const absl::Status& status) {
  if (status_.ok() && !status.ok()) status_ = status;
}

void DeviceLlamaOps::Embed(Act out) {
  if (!status_.ok()) return;
  const cuda::GgufFormat table = dtype_ == DataType::kF32   ? cuda::GgufFormat::kF32
                                 : dtype_ == DataType::kBf16 ? cuda::GgufFormat::kBF16
                                                             : cuda::GgufFormat::kF16;
  Check(kernels_.Embedding(dtype_, table, inputs_->device_token_ids(), weights_.token_embd.data,
                           Buffer(out), Rows(out), weights_.token_embd.rows, config_.hidden_size));
}

void DeviceLlamaOps::RmsNorm(Act in, const void* weight, Act out, int groups) {
  if (!status_.ok() || Rows(in) == 0) return;  // no row samples this step
  const int rows = Rows(in) * groups;
  const int width = Width(in) / groups;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  if (in != out) {
    Check(kernels_.RmsNorm(dtype_, Buffer(in), weight, Buffer(out), rows, width, eps));
    return;
  }
  TESSERA_CHECK(InPlaceCapable(in), "DeviceLlamaOps: in-place RmsNorm on an unsized activation");
  Check(kernels_.RmsNorm(dtype_, Buffer(in), weight, buffers_[spare_].data(), rows, width, eps));
  std::swap(slot_of_[static_cast<int>(in)], spare_);
}

void DeviceLlamaOps::Gemm(Act in, const DeviceMatrix& weight, Act out) {
  const int m = Rows(in);
  if (m == 0) return;  // no row samples this step
  const DataType c_type = out == Act::kLogits ? DataType::kF32 : dtype_;
  if (options_.batch_invariant) {
    Check(kernels_.BatchInvariantGemm(dtype_, c_type, Buffer(in), weight.data, Buffer(out), m,
                                      static_cast<int>(weight.rows),
                                      static_cast<int>(weight.cols)));
    return;
  }
  Check(runtime_.Gemm({.a_type = dtype_,
                       .b_type = dtype_,
                       .c_type = c_type,
                       .a = Buffer(in),
                       .b = weight.data,
                       .c = Buffer(out),
                       .m = m,
                       .n = weight.rows,
                       .k = weight.cols}));
}

void DeviceLlamaOps::Project(Act in, std::initializer_list<Projection> outputs) {
  for (const Projection& p : outputs) {
    if (!status_.ok()) return;
    Gemm(in, p.weight, p.out);
  }
}

void DeviceLlamaOps::AddBias(const void* bias, Act inout) {
  if (!status_.ok()) return;
  Check(kernels_.AddBias(dtype_, Buffer(inout), bias, Rows(inout), Width(inout)));
}

void DeviceLlamaOps::Rope(Act inout, int num_heads) {
  if (!status_.ok()) return;
  const cuda::RopeStyle style = config_.rope_neox ? cuda::RopeStyle::kNeox
                                                  : cuda::RopeStyle::kNormal;
  Check(kernels_.Rope(dtype_, style, Buffer(inout), nullptr, inputs_->device_positions(),
                      weights_.rope_cos_sin, weights_.rope_positions, Rows(inout), num_heads,
                      /*num_kv_heads=*/0, config_.head_dim, config_.rope_dim));
}

void DeviceLlamaOps::Attend(int layer, Act q, Act k, Act v, Act out) {
  if (!status_.ok()) return;
  Check(kernels_.KvWrite(dtype_, Buffer(k), Buffer(v), kv_.k[layer], kv_.v[layer],
                         inputs_->device_slot_mapping(), Rows(k), config_.num_kv_heads,
                         config_.head_dim));
  const StepShape& shape = inputs_->shape();
  const size_t decode_bytes = size_t(shape.num_decode) * Width(q) * device::DataTypeBytes(dtype_);
  if (shape.num_decode > 0) DecodeAttention(layer, Buffer(q), Buffer(out));
  if (shape.num_prefill > 0) {
    PrefillAttention(layer, static_cast<const uint8_t*>(Buffer(q)) + decode_bytes,
                     static_cast<uint8_t*>(Buffer(out)) + decode_bytes);
  }
}

void DeviceLlamaOps::DecodeAttention(int layer, const void* q, void* out) {
  if (!status_.ok()) return;
  const cuda::PagedDecodeParams params{
      .num_seqs = inputs_->shape().num_decode,
      .num_heads = config_.num_heads,
      .num_kv_heads = config_.num_kv_heads,
      .block_size = kv_.block_size,
      .max_blocks_per_seq = attention_.table_stride,
      .max_context_len = std::max(attention_.decode_max_context, 1),
      .scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim)),
      .num_sms = options_.num_sms,
      .partition_size = options_.decode_partition};
  Check(kernels_.DecodeAttention(dtype_, config_.head_dim, params, q, kv_.k[layer], kv_.v[layer],
                                 attention_.decode_tables, inputs_->device_decode_lens(),
                                 out, decode_workspace_.as<float>()));
}

void DeviceLlamaOps::PrefillAttention(int layer, const void* q, void* out) {
  if (!status_.ok()) return;
  const cuda::PagedPrefillParams params{
      .num_seqs = inputs_->shape().num_prefill,
      .num_heads = config_.num_heads,
      .num_kv_heads = config_.num_kv_heads,
      .block_size = kv_.block_size,
      .max_blocks_per_seq = attention_.table_stride,
      .max_query_len = std::max(attention_.prefill_max_query, 1),
      .scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim))};
  Check(kernels_.PrefillAttention(dtype_, config_.head_dim, params, q, kv_.k[layer],
                                  kv_.v[layer], attention_.prefill_tables,
                                  inputs_->device_prefill_query_start(),
                                  inputs_->device_prefill_lens(), out));
}

void DeviceLlamaOps::SwiGlu(Act gate, Act up, Act out) {
  if (!status_.ok()) return;
  Check(kernels_.SwiGlu(dtype_, Buffer(gate), Buffer(up), Buffer(out), Rows(gate), Width(gate)));
}

void DeviceLlamaOps::Add(Act inout, Act delta) {
  if (!status_.ok()) return;
  Check(kernels_.AddInPlace(dtype_, Buffer(inout), Buffer(delta),
                            int64_t{Rows(inout)} * Width(inout)));
}

void DeviceLlamaOps::GatherLastRows(Act in, Act out) {
  if (!status_.ok() || Rows(out) == 0) return;
  Check(kernels_.GatherRows(dtype_, Buffer(in), inputs_->device_last_rows(), Buffer(out),
                            Rows(out), Width(in)));
}

}  // namespace tessera::worker
