#include "worker/cuda/device_model_ops.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/util/check.h"
#include "common/util/status_macros.h"

namespace tessera::worker {
using device::DataType;

absl::StatusOr<std::unique_ptr<DeviceModelOps>> DeviceModelOps::Create(
    device::DeviceRuntime& runtime, DeviceKernels& kernels, const model::ModelConfig& config,
    const ModelPlan& plan, const DeviceModelWeights& weights, const DeviceKvPools& kv,
    const DeviceRecurrentState& state, const DeviceOpsOptions& options) {
  std::unique_ptr<DeviceModelOps> ops(
      new DeviceModelOps(runtime, kernels, config, plan, weights, kv, state, options));
  TESSERA_RETURN_IF_ERROR(ops->AllocateActivations());
  TESSERA_RETURN_IF_ERROR(ops->AllocateDecodeWorkspace());
  TESSERA_RETURN_IF_ERROR(ops->AllocateMoeWorkspace());
  TESSERA_RETURN_IF_ERROR(ops->AllocatePackedScratch());
  return ops;
}

DeviceModelOps::DeviceModelOps(device::DeviceRuntime& runtime, DeviceKernels& kernels,
                               const model::ModelConfig& config, const ModelPlan& plan,
                               const DeviceModelWeights& weights, const DeviceKvPools& kv,
                               const DeviceRecurrentState& state, const DeviceOpsOptions& options)
    : runtime_(runtime),
      kernels_(kernels),
      config_(config),
      plan_(plan),
      weights_(weights),
      kv_(kv),
      state_(state),
      options_(options),
      dtype_(weights.dtype),
      slot_of_(static_cast<size_t>(plan.activations.size())) {}

size_t DeviceModelOps::ElementBytes(ActId act) const {
  return plan_.activations[act].type == ActType::kF32 ? sizeof(float)
                                                      : device::DataTypeBytes(dtype_);
}

absl::Status DeviceModelOps::AllocateActivations() {
  const int num_acts = plan_.activations.size();
  std::vector<size_t> bytes(static_cast<size_t>(num_acts) + 1, 16);  // the last: the spare
  size_t in_place_bytes = 16;
  for (ActId a = 0; a < num_acts; ++a) {
    const ActivationSpec& spec = plan_.activations[a];
    const int rows = spec.rows == ActRows::kSamplingRows ? options_.max_rows : options_.max_tokens;
    bytes[a] = std::max<size_t>(bytes[a], size_t(rows) * spec.width * ElementBytes(a));
    if (spec.normed_in_place) in_place_bytes = std::max(in_place_bytes, bytes[a]);
  }
  for (ActId a = 0; a <= num_acts; ++a) {
    if (a == num_acts || plan_.activations[a].normed_in_place) bytes[a] = in_place_bytes;
    TESSERA_ASSIGN_OR_RETURN(device::DeviceMemory memory,
                             device::DeviceMemory::Allocate(runtime_, bytes[a]));
    activation_bytes_ += static_cast<int64_t>(memory.bytes());
    buffers_.push_back(std::move(memory));
  }
  return absl::OkStatus();
}

absl::Status DeviceModelOps::AllocateDecodeWorkspace() {
  cuda::PagedDecodeParams widest{.num_seqs = options_.max_rows,
                                 .num_heads = config_.num_heads,
                                 .num_kv_heads = config_.num_kv_heads,
                                 .block_size = kv_.block_size,
                                 .max_blocks_per_seq = 1,
                                 .max_context_len = config_.context_length,
                                 .scale = 1.0f,
                                 .num_sms = options_.num_sms,
                                 .partition_size = options_.decode_partition,
                                 .max_num_seqs = options_.max_rows};
  // The most any decode launch can need: every batch size at the longest context (the
  // heuristic's partition count falls as the batch grows, so no single size bounds the rest).
  size_t workspace_floats = 0;
  for (int seqs = 1; seqs <= options_.max_rows; ++seqs) {
    widest.num_seqs = seqs;
    workspace_floats = std::max(workspace_floats,
                                cuda::PagedDecodeWorkspaceFloats(widest, config_.head_dim));
  }
  TESSERA_ASSIGN_OR_RETURN(decode_workspace_,
                           device::DeviceMemory::Allocate(
                               runtime_, std::max<size_t>(workspace_floats, 4) * sizeof(float)));
  // The split launches' arrival counters start at zero, and every launch leaves them so.
  TESSERA_RETURN_IF_ERROR(runtime_.Fill(decode_workspace_.data(), 0, decode_workspace_.bytes()));
  activation_bytes_ += static_cast<int64_t>(decode_workspace_.bytes());
  return absl::OkStatus();
}

absl::Status DeviceModelOps::AllocatePackedScratch() {
  int64_t largest = 0;
  for (const DeviceWeight& w : weights_.tensors) {
    if (w.packed && w.experts == 1) largest = std::max(largest, w.rows * w.cols);  // not stacks
  }
  if (largest == 0) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(
      dequantized_, device::DeviceMemory::Allocate(
                        runtime_, static_cast<size_t>(largest) * device::DataTypeBytes(dtype_)));
  // The streaming path's split workspace: a grid of the blocks resident at once.
  const int blocks = cuda::kPackedStreamBlocksPerSm * std::max(options_.num_sms, 1);
  TESSERA_ASSIGN_OR_RETURN(
      packed_stream_memory_,
      device::DeviceMemory::Allocate(runtime_, cuda::PackedStreamWorkspaceBytes(blocks)));
  // The arrival counters start at zero, and every launch leaves them so.
  TESSERA_RETURN_IF_ERROR(
      runtime_.Fill(packed_stream_memory_.data(), 0, packed_stream_memory_.bytes()));
  packed_stream_ = cuda::PackedStreamWorkspaceAt(packed_stream_memory_.data(), blocks);
  packed_stream_.grid = options_.packed_stream_grid;
  activation_bytes_ += static_cast<int64_t>(dequantized_.bytes() + packed_stream_memory_.bytes());
  return absl::OkStatus();
}

void DeviceModelOps::BeginStep(const DeviceStepInputs& inputs,
                               const DeviceStepAttention& attention, StepPieces* pieces) {
  inputs_ = &inputs;
  attention_ = attention;
  pieces_ = pieces;
  status_ = absl::OkStatus();
  for (size_t a = 0; a < slot_of_.size(); ++a) slot_of_[a] = static_cast<int>(a);
  spare_ = static_cast<int>(slot_of_.size());
}

int DeviceModelOps::Rows(ActId act) const {
  const StepShape& shape = inputs_->shape();
  return plan_.activations[act].rows == ActRows::kSamplingRows ? shape.num_rows
                                                              : shape.num_tokens;
}

void* DeviceModelOps::Buffer(ActId act) const {
  return buffers_[static_cast<size_t>(slot_of_[static_cast<size_t>(act)])].data();
}

const float* DeviceModelOps::logits() const {
  return static_cast<const float*>(Buffer(plan_.logits));
}

void DeviceModelOps::Check(const absl::Status& status) {
  if (status_.ok() && !status.ok()) status_ = status;
}

bool DeviceModelOps::TokenWork() const {
  return status_.ok() && (pieces_ == nullptr || pieces_->TokenWork());
}

bool DeviceModelOps::SequenceWork(bool tail) {
  if (!status_.ok()) return false;
  if (pieces_ == nullptr) return true;
  absl::StatusOr<bool> now = pieces_->SequenceWork(tail);
  Check(now.status());
  return now.ok() && *now;
}

void DeviceModelOps::Embed(WeightId table_id, ActId out) {
  if (!TokenWork()) return;
  const DeviceWeight& embedding = weights_[table_id];
  const cuda::GgufFormat table = embedding.table_format.value_or(
      dtype_ == DataType::kF32 ? cuda::GgufFormat::kF32
      : dtype_ == DataType::kBf16 ? cuda::GgufFormat::kBF16
                                  : cuda::GgufFormat::kF16);
  Check(kernels_.Embedding(dtype_, table, inputs_->device_token_ids(), embedding.data,
                           Buffer(out), Rows(out), embedding.rows, config_.hidden_size));
}

void DeviceModelOps::RmsNorm(ActId in, WeightId weight_id, ActId out, int groups) {
  if (!status_.ok() || Rows(in) == 0) return;  // no row samples this step
  const int rows = Rows(in) * groups;
  const int width = Width(in) / groups;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const void* weight = weights_[weight_id].data;
  if (in != out) {
    if (TokenWork()) {
      Check(kernels_.RmsNorm(dtype_, Buffer(in), weight, Buffer(out), rows, width, eps));
    }
    return;
  }
  TESSERA_CHECK(plan_.activations[in].normed_in_place,
                "DeviceModelOps: in-place RmsNorm on an activation not declared normed_in_place");
  if (TokenWork()) {
    Check(kernels_.RmsNorm(dtype_, Buffer(in), weight, buffers_[spare_].data(), rows, width, eps));
  }
  std::swap(slot_of_[static_cast<size_t>(in)], spare_);  // launched or not (header comment)
}

void DeviceModelOps::Gemm(ActId in, const DeviceWeight& weight, ActId out) {
  const DataType c_type = plan_.activations[out].type == ActType::kF32 ? DataType::kF32 : dtype_;
  GemmRows(Buffer(in), Rows(in), weight, Buffer(out), c_type);
}

void DeviceModelOps::GemmRows(const void* a, int m, const DeviceWeight& weight, void* c,
                              DataType c_type) {
  if (m == 0 || !status_.ok()) return;  // no row samples this step
  if (weight.packed) {
    TESSERA_CHECK(c_type == dtype_ && !options_.batch_invariant,
                  "DeviceModelOps: a packed weight needs a compute-type output and the default "
                  "mode (UploadModelWeights packs neither f32-output projections nor for the "
                  "batch-invariant mode)");
    if (m <= kPackedLinearMaxRows) {
      Check(kernels_.PackedLinear(dtype_, a, m, *weight.packed, c, packed_stream_));
      return;
    }
    // More rows: the weight dequantized into the scratch, then the dense GEMM below.
    Check(kernels_.PackedDequantize(dtype_, *weight.packed, dequantized_.data()));
    Check(runtime_.Gemm({.a_type = dtype_, .b_type = dtype_, .c_type = c_type, .a = a,
                         .b = dequantized_.data(), .c = c, .m = m, .n = weight.rows,
                         .k = weight.cols}));
    return;
  }
  if (options_.batch_invariant) {
    Check(kernels_.BatchInvariantGemm(dtype_, c_type, a, weight.data, c, m,
                                      static_cast<int>(weight.rows),
                                      static_cast<int>(weight.cols)));
    return;
  }
  Check(runtime_.Gemm({.a_type = dtype_,
                       .b_type = dtype_,
                       .c_type = c_type,
                       .a = a,
                       .b = weight.data,
                       .c = c,
                       .m = m,
                       .n = weight.rows,
                       .k = weight.cols}));
}

void DeviceModelOps::Project(ActId in, std::initializer_list<Projection> outputs) {
  for (const Projection& p : outputs) {
    if (!TokenWork()) return;
    const DeviceWeight& weight = weights_[p.weight];
    Gemm(in, weight, p.out);
    if (weight.partial_sum && Rows(p.out) > 0 && status_.ok()) SumOverRanks(p.out);
  }
}

// A row-parallel projection's output holds this rank's partial sum: the all-reduce completes it.
void DeviceModelOps::SumOverRanks(ActId act) {
  TESSERA_CHECK(options_.communicator != nullptr,
                "DeviceModelOps: a tensor-parallel weight without a communicator");
  const DataType type = plan_.activations[act].type == ActType::kF32 ? DataType::kF32 : dtype_;
  Check(options_.communicator->AllReduceSum(Buffer(act), int64_t{Rows(act)} * Width(act), type));
}

void DeviceModelOps::AddBias(WeightId bias, ActId inout) {
  if (!TokenWork()) return;
  Check(kernels_.AddBias(dtype_, Buffer(inout), weights_[bias].data, Rows(inout), Width(inout)));
}

// The residual add and the next norm in one launch (rms_norm.cuh's fused form).
void DeviceModelOps::AddRmsNorm(ActId inout, ActId delta, WeightId weight_id, ActId out) {
  if (!TokenWork()) return;
  TESSERA_CHECK(out != inout && out != delta, "DeviceModelOps: AddRmsNorm's out aliases an input");
  Check(kernels_.AddRmsNorm(dtype_, Buffer(inout), Buffer(delta), weights_[weight_id].data,
                            Buffer(out), Rows(inout), Width(inout),
                            static_cast<float>(config_.rms_norm_eps)));
}

// At <= 4 rows of a packed weight the SwiGlu is the streaming GEMM's epilogue (one launch);
// otherwise the product into gate_up's [gate | up] rows, then SwiGlu over its halves.
void DeviceModelOps::ProjectSwiGlu(ActId in, WeightId weight_id, ActId gate_up, ActId out) {
  if (!TokenWork()) return;
  const DeviceWeight& weight = weights_[weight_id];
  TESSERA_CHECK(weight.rows == 2 * Width(out) && Width(gate_up) == weight.rows,
                "DeviceModelOps: ProjectSwiGlu's widths disagree");
  if (weight.packed && !weight.partial_sum && !options_.batch_invariant &&
      plan_.activations[out].type != ActType::kF32 &&
      cuda::PackedLinearSwiGluTakes(Rows(in), *weight.packed)) {
    Check(kernels_.PackedLinearSwiGlu(dtype_, Buffer(in), Rows(in), *weight.packed, Buffer(out),
                                      packed_stream_));
    return;
  }
  Project(in, {{weight_id, gate_up}});
  if (!status_.ok()) return;
  Check(kernels_.SwiGluHalves(dtype_, Buffer(gate_up), Buffer(out), Rows(out), Width(out)));
}

void DeviceModelOps::SwiGlu(ActId gate, ActId up, ActId out) {
  if (!TokenWork()) return;
  Check(kernels_.SwiGlu(dtype_, Buffer(gate), Buffer(up), Buffer(out), Rows(gate), Width(gate)));
}

void DeviceModelOps::Add(ActId inout, ActId delta) {
  if (!TokenWork()) return;
  Check(kernels_.AddInPlace(dtype_, Buffer(inout), Buffer(delta),
                            int64_t{Rows(inout)} * Width(inout)));
}

void DeviceModelOps::GatherLastRows(ActId in, ActId out) {
  if (!SequenceWork(/*tail=*/true) || Rows(out) == 0) return;
  Check(kernels_.GatherRows(dtype_, Buffer(in), inputs_->device_last_rows(), Buffer(out),
                            Rows(out), Width(in)));
}

}  // namespace tessera::worker
