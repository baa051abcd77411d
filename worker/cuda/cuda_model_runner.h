// The `cuda` model runner (DESIGN.md §5): a model definition (worker/models/model_plan.h) on the
// device ops (device_model_ops.h), over a DeviceRuntime —
// a real GPU (`--device cuda`) or the SIMT-emulated device (`--device emulated`), the very same
// runner code either way.
//
// At creation: weights dequantized to the compute dtype and uploaded once, or taken over already
// on the device (synthetic ones, dummy_model_weights.h) (bytes and load time reported),
// activations, persistent step buffers (device_step_inputs.h) and the decode
// attention workspace allocated for the capacity (max_num_batched_tokens, max_num_seqs), then
// the paged KV pool from what is left (gpu_memory_utilization of the device's memory, or an
// explicit size), zeroed; in eager graph mode every decode bucket is captured.
//
// A step: validate; lay the batch out (one-token sequences first, then prefill chunks; a
// decode-only step padded to its graph bucket with inert rows: slot -1, context 0, inactive
// sampling); ONE host->device copy; replay the bucket's graph or enqueue the forward pass and
// the device sampler eagerly; ONE device->host copy of the sampled ids and logprobs (the only
// wait on the hot path). Device time comes from events around the step's work.
//
// Hybrid plans (Gated DeltaNet linear-attention layers, MoE FFNs): every linear layer has an f32
// recurrent state per slot on the device (conv [max_num_seqs, K-1, C], delta rule
// [max_num_seqs, h_v, d_k, d_v], the cpu backend's layouts; cuda_runner_state.cc), allocated at
// creation before the KV pool and zeroed (runtime Fill) when a sequence begins or ends, so a
// preempted sequence recomputes from its first token. Each step's sequences name their slot in
// the step inputs (one entry per laid-out sequence, padding rows inert), so a decode graph's
// state pointers never move. Forward saves the batch's slot states to a scratch and restores
// them after the pass: it leaves recurrent state as it found it.
//
// Ownership: owns the runtime, kernels, a copy of the plan, device weights, KV pool, step
// buffers, ops and graph cache; borrows nothing after Create (the host weights may be freed). Threading: one thread
// (the worker's step thread) calls it.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "kernels/device/device_memory.h"
#include "kernels/device/device_runtime.h"
#include "worker/cuda/device_block_tables.h"
#include "worker/cuda/device_kernels.h"
#include "worker/cuda/device_model_ops.h"
#include "worker/cuda/device_model_weights.h"
#include "worker/cuda/device_slot_sampling.h"
#include "worker/cuda/device_step_inputs.h"
#include "worker/cuda/graph_cache.h"
#include "worker/model_runner.h"
#include "worker/models/host_model_weights.h"
#include "worker/models/model_plan.h"

namespace tessera::worker {

struct CudaRunnerOptions {
  device::DataType dtype = device::DataType::kBf16;  // activations, weights and KV
  int block_size = 16;
  // KV pool size, first that is set: an exact block count (including the null block 0), bytes,
  // else gpu_memory_utilization of the device's memory minus everything else allocated.
  int64_t num_kv_blocks = 0;
  int64_t kv_cache_bytes = 0;
  double gpu_memory_utilization = 0.90;
  int max_num_seqs = 256;
  int max_num_batched_tokens = 2048;
  CudaGraphMode graphs = CudaGraphMode::kLazy;
  bool batch_invariant = false;
  // Quantized projections stay packed on the device (device_model_weights.h) unless false, or
  // the mode is batch-invariant or the dtype f32 (then every weight is dequantized at load).
  bool keep_weights_packed = true;
  int decode_partition = 0;  // > 0 forces the decode attention's split (tests)
  // The batch-1 packed GEMM's split when a projection's row tiles fit the resident blocks.
  cuda::PackedStreamGrid packed_stream_grid = cuda::PackedStreamGrid::kBlockPerTileWhenTilesFit;
  // Steps with prefill rows replay piecewise graphs per token bucket (graph_cache.h) unless false
  // (or graphs are off); they then run eagerly, as decode steps past the last bucket do.
  bool mixed_step_graphs = true;
  // Device memory for recurrent-state snapshots (hybrid prefix caching), taken before the KV
  // pool: as many whole snapshots as fit, at most MaxStateSnapshots(max_num_seqs); none without linear layers.
  int64_t state_snapshot_bytes = 0;
  // One rank of a tensor-parallel worker (worker/parallel/tensor_parallel_runner.h): sums the
  // row-parallel projections' outputs over the ranks. Borrowed; null on a single device.
  Communicator* communicator = nullptr;
  // Start-up progress (weights upload, eager graph capture) for the person and /readyz;
  // borrowed, null: none reported.
  util::LoadProgress* progress = nullptr;
};

// "bf16" | "f16" | "f32"; INVALID_ARGUMENT naming the accepted values otherwise.
absl::StatusOr<device::DataType> ParseComputeDtype(std::string_view name);

class CudaModelRunner final : public ModelRunner {
 public:
  // Errors, one line each: an architecture the kernels do not cover (head_dim, hybrid layers), a
  // weight type that cannot be dequantized, too little device memory (naming what was needed).
  // `file` (the model's GGUF, optional): the raw blocks of matrices `weights` holds dequantized
  // (Q4_K), so they too stay packed.
  static absl::StatusOr<std::unique_ptr<CudaModelRunner>> Create(
      std::unique_ptr<device::DeviceRuntime> runtime, const model::ModelConfig& config,
      const ModelPlan& plan, const HostModelWeights& weights, const CudaRunnerOptions& options,
      const gguf::GgufFile* file = nullptr);
  // Weights already on `runtime` (e.g. MakeDummyModelWeights), in options.dtype and declared by
  // `plan`, RoPE table included; the runner takes them over. The path above uploads host
  // weights and then continues here.
  static absl::StatusOr<std::unique_ptr<CudaModelRunner>> Create(
      std::unique_ptr<device::DeviceRuntime> runtime, const model::ModelConfig& config,
      const ModelPlan& plan, std::unique_ptr<DeviceModelWeights> weights,
      const CudaRunnerOptions& options);
  ~CudaModelRunner() override;

  const model::ModelConfig& config() const override { return config_; }
  KvPoolInfo kv_pool() const override;
  std::string backend_name() const override { return "cuda"; }
  int max_num_seqs() const override { return options_.max_num_seqs; }
  int state_snapshot_slots() const override { return num_snapshots_; }
  // Enqueued device copies, ordered with the steps on the runtime's stream; a failure is kept
  // and returned by the next step.
  void SaveStateSnapshot(int slot, int snapshot) override;
  void RestoreStateSnapshot(int snapshot, int slot) override;
  ModelLayerInfo layer_info() const override {
    return {.attention_layers = plan_.num_attention_layers,
            .linear_layers = plan_.num_linear_layers,
            .state_bytes_per_sequence =
                state_floats_per_slot() * static_cast<int64_t>(sizeof(float))};
  }
  void BeginSequence(int slot, const sampling::SamplingParams& params,
                     std::span<const int32_t> prompt, std::span<const int32_t> generated) override;
  void EndSequence(int slot) override;
  // Rows with pending masks: the forward pass is enqueued (replaying a forward-only graph for a
  // decode step), then fill_pending_masks runs on the host while the device computes, then the
  // masks go over and the logits adjustment and sampler are enqueued.
  absl::Status Step(std::span<const SequenceWork> batch, StepSamples* samples,
                    const FillPendingMasks& fill_pending_masks = {}) override;
  absl::Status Forward(std::span<const SequenceWork> batch, StepLogits* logits) override;

  device::DeviceRuntime& runtime() { return *runtime_; }
  const device::DeviceRuntime& runtime() const { return *runtime_; }
  const CudaRunnerOptions& options() const { return options_; }
  const DeviceModelWeights& device_weights() const { return *weights_; }
  const GraphCache& graphs() const { return *graphs_; }
  // The KV pools' memory, one allocation per layer's K and V (tests read them back to prove
  // padding rows write nothing).
  const std::vector<device::DeviceMemory>& kv_memory() const { return kv_memory_; }
  int64_t activation_bytes() const;
  // The weight bytes one batch-1 decode step reads: every projection as held on the device
  // (packed or dense; the output head included, the embedding table not) and, of each expert
  // stack, the share of the experts a token uses.
  int64_t DecodeStepWeightBytes() const;
  // "NVIDIA H100 80GB HBM3, 79.1 GiB" / "emulated (SIMT on the CPU), 1.0 GiB", dtype, mode.
  std::string DeviceDescription() const;
  // Step's and Forward's checks of a batch, alone (`sampling`: Step's), touching no device
  // state: INVALID_ARGUMENT as ModelRunner::Step documents. A tensor-parallel worker validates
  // once before any rank starts.
  absl::Status Validate(std::span<const SequenceWork> batch, bool sampling);

 private:
  CudaModelRunner(std::unique_ptr<device::DeviceRuntime> runtime,
                  const model::ModelConfig& config, ModelPlan plan,
                  const CudaRunnerOptions& options);
  // What both Create paths check before any device work.
  static absl::Status CheckRunnable(const model::ModelConfig& config, const ModelPlan& plan,
                                    const CudaRunnerOptions& options);
  // `kernels`: those the weights were uploaded with, or null (made here).
  absl::Status Initialize(std::unique_ptr<DeviceModelWeights> weights,
                          std::unique_ptr<DeviceKernels> kernels = nullptr);
  static absl::StatusOr<std::unique_ptr<CudaModelRunner>> CreateWithKernels(
      std::unique_ptr<device::DeviceRuntime> runtime, const model::ModelConfig& config,
      const ModelPlan& plan, std::unique_ptr<DeviceModelWeights> weights,
      const CudaRunnerOptions& options, std::unique_ptr<DeviceKernels> kernels);
  absl::Status AllocateKvPool();
  absl::StatusOr<int64_t> KvBlocksToAllocate(int64_t block_bytes);
  int64_t KvBlockBytes() const;

  // Recurrent state of the linear layers (cuda_runner_state.cc).
  absl::Status AllocateRecurrentState();
  int64_t state_floats_per_slot() const {
    return plan_.num_linear_layers * (conv_floats_per_slot_ + ssm_floats_per_slot_);
  }
  // Zeroes `slot`'s state in every linear layer (enqueued; a failure is kept in state_error_).
  void ClearState(int slot);
  // Forward: the batch's slot states copied to / back from saved_states_ (grow-only).
  absl::Status SaveStates(std::span<const SequenceWork> batch);
  absl::Status RestoreStates(std::span<const SequenceWork> batch);
  // Copies between `slot`'s state and snapshot `snapshot` (to_snapshot: slot -> snapshot).
  void CopySnapshot(int slot, int snapshot, bool to_snapshot);
  // A graph capture's warm-up run (graph_cache.h): the laid-out step with every recurrent entry
  // inert, so the replay that follows advances the state once; then the real entries go back.
  absl::Status WarmUpWithoutState(bool sample);

  // Lays `batch` out in the step buffers for `rows_to_run` sequences (>= batch size; the rest
  // inert padding); `sampling` (Step) fills the rows' sampler parameters and syncs block tables
  // by appended entries, else (Forward) by comparing whole tables. (cuda_step_layout.cc)
  // `in_graph`: the step runs as a CUDA graph (captured or replayed), so its decode attention is
  // planned for the model's whole context (a graph's launch shapes are frozen).
  // `padded_tokens`: inert tokens after the sequences' (a step with prefill rows padded to its
  // token bucket), in no sequence.
  void LayOut(std::span<const SequenceWork> batch, int rows_to_run, bool sampling, bool in_graph,
              int padded_tokens = 0);
  void LaySequence(const SequenceWork& s, int j, int num_decode, int* token, bool sampling);
  void LayOutPadding(int first_token, int count, bool sampling);
  void LayOutPaddedTokens(int first_token, int count);
  void SetSamplingRow(int row, int slot, int position);
  // Whether a step of this batch can replay a decode graph: every sequence one token, sampling.
  static bool Graphable(std::span<const SequenceWork> batch);
  // The forward pass (+ the sampling tail when `sample`) for the laid-out step.
  absl::Status EnqueueStep(bool sample) { return EnqueuePass(StepPieces::Mode::kWhole, sample); }
  // One pass over the laid-out step in a piecewise-graph mode (step_pieces.h): the block-table
  // copy unless capturing, the model, and the sampling tail when `sample` in kWhole and kReplay.
  absl::Status EnqueuePass(StepPieces::Mode mode, bool sample);
  // Step's two kinds, laid out, uploaded and run through the graph cache (cuda_runner_step.cc):
  // decode-only, and with prefill rows (`tokens` of them in the batch). `masks_later`: no
  // sampling (SampleWithLateMasks follows). *input_seconds: start -> inputs uploaded.
  absl::StatusOr<GraphStepOutcome> RunDecodeStep(std::span<const SequenceWork> batch,
                                                 bool masks_later,
                                                 std::chrono::steady_clock::time_point start,
                                                 double* input_seconds);
  // The laid-out inputs' one copy, *input_seconds = start -> now, then the step-start event.
  absl::Status UploadAndMarkStart(std::chrono::steady_clock::time_point start,
                                  double* input_seconds);
  absl::StatusOr<GraphStepOutcome> RunMixedStep(std::span<const SequenceWork> batch, int tokens,
                                                bool masks_later,
                                                std::chrono::steady_clock::time_point start,
                                                double* input_seconds);
  // logit_bias and token masks, then the sampler, over the step's logits.
  absl::Status EnqueueSampling();
  // The masks fill_pending_masks gives the pending rows, sent after the forward pass, then the
  // sampling tail.
  absl::Status SampleWithLateMasks(std::span<const SequenceWork> batch,
                                   const FillPendingMasks& fill_pending_masks);
  absl::Status CaptureEagerGraphs();
  void CollectSamples(std::span<const SequenceWork> batch, StepSamples* samples);
  // The sampling rows' indices sorted by their batch index (results go out in batch order).
  const std::vector<int32_t>& RowsInBatchOrder();

  std::unique_ptr<device::DeviceRuntime> runtime_;
  model::ModelConfig config_;
  ModelPlan plan_;
  CudaRunnerOptions options_;
  std::unique_ptr<DeviceKernels> kernels_;
  std::unique_ptr<DeviceModelWeights> weights_;
  std::unique_ptr<DeviceStepInputs> inputs_;
  std::unique_ptr<DeviceBlockTables> tables_;
  DeviceKvPools kv_;
  std::vector<device::DeviceMemory> kv_memory_;  // [2 × attention layers]: K0, V0, K1, ...
  device::DeviceMemory sampling_workspace_;  // the sampler's split-row scratch
  DeviceRecurrentState state_;
  device::DeviceMemory state_memory_;
  device::DeviceMemory saved_states_;
  device::DeviceMemory snapshot_memory_;  // [num_snapshots_, state floats per slot]
  int num_snapshots_ = 0;
  int64_t conv_floats_per_slot_ = 0, ssm_floats_per_slot_ = 0;
  absl::Status state_error_;  // the first failed ClearState, returned by the next step
  std::unique_ptr<DeviceModelOps> ops_;
  std::unique_ptr<StepPieces> pieces_;
  std::unique_ptr<GraphCache> graphs_;
  // Forward-only graphs, for decode steps whose masks come during the forward pass (captured
  // lazily in every mode but off: a server that never guides a request captures none).
  std::unique_ptr<GraphCache> forward_graphs_;
  DeviceSlotSampling sampling_;
  device::EventHandle step_start_ = 0, step_end_ = 0;

  // Per-step host scratch (grow-only).
  DeviceStepAttention attention_;
  std::vector<int32_t> order_;           // laid-out position -> batch index (decode first)
  std::vector<int32_t> row_sequence_;    // sampling row -> batch index
  std::vector<int32_t> rows_in_batch_order_;
  std::vector<float> device_logits_;     // Forward: the rows' logits as the device has them
  std::vector<bool> slot_seen_;          // Validate: slots used by the batch
  std::vector<cuda::DeviceRecurrentSequence> recurrent_entries_;  // WarmUpWithoutState
  std::vector<int32_t> penalty_tokens_, penalty_counts_;
  std::vector<uint8_t> penalty_in_prompt_;
};

}  // namespace tessera::worker
