// The device backend of the model definitions (worker/models/model_ops.h): each op enqueues one
// or two kernels (device_kernels.h) or a GEMM on the device runtime's stream, over the plan's
// activations allocated once for the runner's capacity. Nothing is allocated or synchronised
// here, so a decode step's ops can be captured into a CUDA graph and replayed.
//
// Modes. Default: GEMMs through DeviceRuntime::Gemm (cuBLAS on a GPU); a weight kept packed
// (device_model_weights.h) through the packed-linear kernel for up to kPackedLinearMaxRows rows,
// else dequantized into a scratch matrix for DeviceRuntime::Gemm; one-token sequences
// through the split-K decode attention kernel and longer chunks through the prefill kernel.
// Batch invariant (DESIGN.md §6): GEMMs through the batch-invariant kernel and every sequence
// through the prefill attention kernel (its per-row reduction order depends only on the row's
// position), so a sequence's results do not depend on what else is in the step, nor on how its
// prompt was chunked.
//
// Hybrid layer kinds (device_layer_ops.cc): SplitHeads and SigmoidMul are elementwise kernels;
// LinearAttend runs the Gated DeltaNet mixer (conv -> gates -> delta rule -> gated RMSNorm, the
// cpu backend's order) on the runner's per-(linear layer, slot) f32 recurrent state, each
// sequence's slot from the step inputs' recurrent entries; MoeFfn runs the router GEMM (f32
// logits), the device routing and grouping, the grouped expert GEMMs, the shared expert on the
// ordinary GEMM path with its gate logit, and the combine, over a workspace sized at creation for
// max_tokens.
//
// Piecewise graphs (step_pieces.h): with a StepPieces lent to BeginStep, each token-shaped op
// launches only when pieces->TokenWork() allows, and each sequence-shaped op (paged attention,
// LinearAttend, GatherLastRows: the head's first op, the tail) asks pieces->SequenceWork() first.
// An in-place RmsNorm swaps its buffers whether or not it launches, so every pass over the model
// addresses the same buffers.
//
// A launch error is kept (the first one) and later ops do nothing; the runner reads status()
// after the forward pass. Ownership: owns its activations, the decode attention's and MoE
// workspaces and the packed GEMMs' scratch (a dense copy for m > 16, the streaming path's split
// workspace for m <= 4, sized for the device's SMs); borrows
// weights, kernels, runtime, KV pools, recurrent state and step inputs from its runner.
// Threading: the step thread only.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "kernels/device/device_memory.h"
#include "kernels/device/device_runtime.h"
#include "worker/cuda/device_kernels.h"
#include "worker/cuda/device_model_weights.h"
#include "worker/cuda/device_step_inputs.h"
#include "worker/cuda/step_pieces.h"
#include "worker/models/model_ops.h"
#include "worker/models/model_plan.h"
#include "worker/parallel/communicator.h"

namespace tessera::worker {

// Every attention layer's K and V pool: [num_blocks, block_size, num_kv_heads, head_dim] of the
// dtype.
struct DeviceKvPools {
  int64_t num_blocks = 0;
  int block_size = 0;
  std::vector<void*> k = {};  // [attention layers]
  std::vector<void*> v = {};
};

// What the attention of one step needs beyond the step inputs: host-side maxima that size the
// kernels' grids (for a graph, the values of its bucket, fixed at capture).
// Every linear (GDN) layer's recurrent state, f32 on the device, the cpu backend's layouts:
// conv [num_slots, K-1, channels] and delta rule [num_slots, h_v, d_k, d_v] (empty without linear
// layers). Owned by the runner.
struct DeviceRecurrentState {
  std::vector<float*> conv, ssm;  // [linear layers]
};

// MoeFfn's scratch for max_tokens tokens (one allocation; device_layer_ops.cc). The gate/up
// scratch and the shared expert's rows are of the compute type, the rest as typed.
struct DeviceMoeWorkspace {
  device::DeviceMemory memory;
  float* logits = nullptr;        // [tokens, experts], softmaxed in place by the routing
  float* shared_logit = nullptr;  // [tokens]
  int32_t* expert_ids = nullptr;  // [tokens, k]
  float* weights = nullptr;       // [tokens, k]
  cuda::MoeGroupsView groups;
  void* gate = nullptr;           // [tokens * k, expert ffn]
  void* up = nullptr;             // [tokens * k, expert ffn]
  float* y = nullptr;             // [tokens * k, hidden]
  void* shared_gate = nullptr;    // [tokens, shared ffn]
  void* shared_up = nullptr;      // [tokens, shared ffn]
  void* shared_out = nullptr;     // [tokens, hidden]
};

struct DeviceStepAttention {
  int decode_max_context = 0;  // >= every decode sequence's context length
  int prefill_max_query = 0;   // >= every prefill chunk
  int table_stride = 0;        // entries per block-table row
  const int32_t* decode_tables = nullptr;   // [num_decode, table_stride] on the device
  const int32_t* prefill_tables = nullptr;  // [num_prefill, table_stride] on the device
};

// Rows up to which a packed weight's GEMM is the packed-linear kernel (its tensor-core decode
// path, kernels/cuda/packed_linear_tc.cuh); more rows dequantize the weight into a scratch matrix
// and run the dense GEMM: the packed shared-memory tensor-core path measured 5-8x slower than a
// dense cuBLAS GEMM at m = 16 on an H200 (docs/perf/gpu-h200-2026-11-26-f03bba1.md).
inline constexpr int kPackedLinearMaxRows = 16;

struct DeviceOpsOptions {
  bool batch_invariant = false;
  int max_tokens = 0;  // activation rows
  int max_rows = 0;    // sampling rows (kFinal, kLogits)
  int num_sms = 132;   // the decode attention's split heuristic
  int decode_partition = 0;  // > 0 forces the decode kernel's partition size
  // The streaming GEMM's split when the row tiles fit the resident blocks (packed_stream_split.h).
  cuda::PackedStreamGrid packed_stream_grid = cuda::PackedStreamGrid::kBlockPerTileWhenTilesFit;
  // Tensor parallelism (worker/parallel/): sums the outputs of partial_sum weights over the
  // ranks; null on a single device (no weight is then partial_sum).
  Communicator* communicator = nullptr;
};

class DeviceModelOps {
 public:
  // Borrows plan, weights, KV pools and recurrent state (they must outlive the ops).
  static absl::StatusOr<std::unique_ptr<DeviceModelOps>> Create(
      device::DeviceRuntime& runtime, DeviceKernels& kernels, const model::ModelConfig& config,
      const ModelPlan& plan, const DeviceModelWeights& weights, const DeviceKvPools& kv,
      const DeviceRecurrentState& state, const DeviceOpsOptions& options);

  // Points the ops at the step `inputs` describe (shape and device addresses); `pieces`: the
  // pass's piecewise-graph mode (nullptr: every op launches).
  void BeginStep(const DeviceStepInputs& inputs, const DeviceStepAttention& attention,
                 StepPieces* pieces = nullptr);
  const absl::Status& status() const { return status_; }
  // The logits of the step's rows, [num_rows, vocab] f32 on the device.
  const float* logits() const;
  // The same buffer, for the sampler's in-place logits processing (the structured-output mask).
  float* mutable_logits() { return static_cast<float*>(Buffer(plan_.logits)); }
  int64_t activation_bytes() const { return activation_bytes_; }

  // The ops of model_ops.h.
  bool Has(WeightId id) const { return id != kNoWeight && weights_[id].present(); }
  void Embed(WeightId table, ActId out);
  void RmsNorm(ActId in, WeightId weight, ActId out, int groups);
  void Project(ActId in, std::initializer_list<Projection> outputs);
  void AddBias(WeightId bias, ActId inout);
  void AddRmsNorm(ActId inout, ActId delta, WeightId weight, ActId out);
  void RotaryAttend(int kv_layer, ActId q, ActId k, ActId v, ActId out);
  void RotaryAttendQkv(int kv_layer, ActId qkv, const QkvBiases& biases, ActId q, ActId k,
                       ActId v, ActId out);
  void ProjectSwiGlu(ActId in, WeightId weight, ActId gate_up, ActId out);
  void SplitHeads(ActId in, int groups, std::initializer_list<SplitPart> parts);
  void SigmoidMul(ActId gate, ActId inout);
  void SwiGlu(ActId gate, ActId up, ActId out);
  void Add(ActId inout, ActId delta);
  void GatherLastRows(ActId in, ActId out);
  void LinearAttend(int linear_layer, const GdnOpWeights& weights, const GdnOpActs& acts);
  void MoeFfn(ActId in, const MoeOpWeights& weights, ActId out);

 private:
  DeviceModelOps(device::DeviceRuntime& runtime, DeviceKernels& kernels,
                 const model::ModelConfig& config, const ModelPlan& plan,
                 const DeviceModelWeights& weights, const DeviceKvPools& kv,
                 const DeviceRecurrentState& state, const DeviceOpsOptions& options);
  absl::Status AllocateActivations();
  absl::Status AllocateDecodeWorkspace();
  absl::Status AllocateMoeWorkspace();  // device_layer_ops.cc
  absl::Status AllocatePackedScratch();  // dequantized_ and the streaming path's workspace
  int Rows(ActId act) const;
  int Width(ActId act) const { return static_cast<int>(plan_.activations[act].width); }
  void* Buffer(ActId act) const;
  size_t ElementBytes(ActId act) const;
  // Keeps the first error.
  void Check(const absl::Status& status);
  // The all-reduce after a row-parallel projection (DeviceOpsOptions::communicator).
  void SumOverRanks(ActId act);
  // Whether a token-shaped op launches now (no error, and the pieces' mode allows it).
  bool TokenWork() const;
  // Before a sequence-shaped op (tail: the head's first): whether it launches now.
  bool SequenceWork(bool tail);
  void Gemm(ActId in, const DeviceWeight& weight, ActId out);
  // c [m, weight.rows] of c_type = a [m, weight.cols] (compute type) · weightᵀ.
  void GemmRows(const void* a, int m, const DeviceWeight& weight, void* c,
                device::DataType c_type);
  void SharedExpert(ActId in, const MoeOpWeights& w);  // device_layer_ops.cc
  MoeExpertWeights ExpertWeights(const DeviceWeight& w, int first_row = 0, int rows = 0) const;
  // RoPE + KV write of `tokens` rows (rope_kv_write.cuh), q rotated into q_out.
  void RopeKvWrite(int kv_layer, const void* q_in, void* k, void* v, int64_t q_stride,
                   int64_t kv_stride, ActId q_out, int tokens, const QkvBiases& biases = {});
  void Attention(int kv_layer, ActId q, ActId out);
  void DecodeAttention(int kv_layer, const void* q, void* out);
  void PrefillAttention(int kv_layer, const void* q, void* out);

  device::DeviceRuntime& runtime_;
  DeviceKernels& kernels_;
  model::ModelConfig config_;
  const ModelPlan& plan_;
  const DeviceModelWeights& weights_;
  const DeviceKvPools& kv_;
  const DeviceRecurrentState& state_;
  DeviceOpsOptions options_;
  device::DataType dtype_;
  const DeviceStepInputs* inputs_ = nullptr;
  StepPieces* pieces_ = nullptr;
  DeviceStepAttention attention_;
  absl::Status status_;

  // Activations: buffers_[slot_of_[act]]; an in-place RmsNorm writes the spare buffer (the last)
  // and swaps it in (reset every step, so a captured graph and its replays see the same
  // addresses). Activations normed in place and the spare are sized for the largest of them.
  std::vector<device::DeviceMemory> buffers_;
  std::vector<int> slot_of_;
  int spare_ = 0;
  device::DeviceMemory decode_workspace_;
  DeviceMoeWorkspace moe_;
  // The largest packed weight, dense (GEMMs of more than kPackedLinearMaxRows rows).
  device::DeviceMemory dequantized_;
  device::DeviceMemory packed_stream_memory_;
  cuda::PackedStreamWorkspace packed_stream_;  // over packed_stream_memory_
  int64_t activation_bytes_ = 0;
};

}  // namespace tessera::worker
