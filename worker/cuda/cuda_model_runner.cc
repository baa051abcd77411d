#include "worker/cuda/cuda_model_runner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/util/absl_compat.h"
#include "common/util/check.h"
#include "common/util/status_macros.h"
#include "worker/models/rope_params.h"
#include "worker/step_batch_validation.h"

namespace tessera::worker {

absl::StatusOr<device::DataType> ParseComputeDtype(std::string_view name) {
  if (name == "bf16") return device::DataType::kBf16;
  if (name == "f16") return device::DataType::kF16;
  if (name == "f32") return device::DataType::kF32;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", util::ToAbsl(name), "' (expected bf16, f16 or f32)"));
}

CudaModelRunner::CudaModelRunner(std::unique_ptr<device::DeviceRuntime> runtime,
                                 const model::ModelConfig& config, ModelPlan plan,
                                 const CudaRunnerOptions& options)
    : runtime_(std::move(runtime)),
      config_(config),
      plan_(std::move(plan)),
      options_(options),
      sampling_(options.max_num_seqs) {}

CudaModelRunner::~CudaModelRunner() {
  if (runtime_) (void)runtime_->Synchronize();
}

absl::Status CudaModelRunner::CheckRunnable(const model::ModelConfig& config,
                                            const ModelPlan& plan,
                                            const CudaRunnerOptions& options) {
  if (!DeviceKernels::SupportsHeadDim(config.head_dim)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the cuda backend has no attention kernel for head_dim ", config.head_dim,
                     " (built: 32, 64, 80, 96, 128, 256)"));
  }
  if (options.block_size < 1 || options.max_num_seqs < 1 || options.max_num_batched_tokens < 1) {
    return absl::InvalidArgumentError(
        "block_size, max_num_seqs and max_num_batched_tokens must be >= 1");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CudaModelRunner>> CudaModelRunner::Create(
    std::unique_ptr<device::DeviceRuntime> runtime, const model::ModelConfig& config,
    const ModelPlan& plan, const HostModelWeights& weights, const CudaRunnerOptions& options,
    const gguf::GgufFile* file) {
  TESSERA_RETURN_IF_ERROR(CheckRunnable(config, plan, options));
  const kernels::cpu::RopeTable rope(
      RopeParamsForModel(config, weights[plan.head.rope_freqs].values), config.context_length);
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<DeviceKernels> kernels, MakeDeviceKernels(*runtime));
  const WeightUploadOptions upload{.keep_packed = options.keep_weights_packed &&
                                                  !options.batch_invariant &&
                                                  options.dtype != device::DataType::kF32,
                                   .file = file,
                                   .kernels = kernels.get(),
                                   .progress = options.progress};
  TESSERA_ASSIGN_OR_RETURN(
      std::unique_ptr<DeviceModelWeights> device_weights,
      UploadModelWeights(*runtime, plan.weights, weights, rope, options.dtype, upload));
  return CreateWithKernels(std::move(runtime), config, plan, std::move(device_weights), options,
                           std::move(kernels));
}

absl::StatusOr<std::unique_ptr<CudaModelRunner>> CudaModelRunner::Create(
    std::unique_ptr<device::DeviceRuntime> runtime, const model::ModelConfig& config,
    const ModelPlan& plan, std::unique_ptr<DeviceModelWeights> weights,
    const CudaRunnerOptions& options) {
  return CreateWithKernels(std::move(runtime), config, plan, std::move(weights), options, nullptr);
}

absl::StatusOr<std::unique_ptr<CudaModelRunner>> CudaModelRunner::CreateWithKernels(
    std::unique_ptr<device::DeviceRuntime> runtime, const model::ModelConfig& config,
    const ModelPlan& plan, std::unique_ptr<DeviceModelWeights> weights,
    const CudaRunnerOptions& options, std::unique_ptr<DeviceKernels> kernels) {
  TESSERA_RETURN_IF_ERROR(CheckRunnable(config, plan, options));
  TESSERA_CHECK(weights != nullptr && weights->dtype == options.dtype &&
                    static_cast<int>(weights->tensors.size()) == plan.weights.size(),
                "CudaModelRunner::Create: device weights of another dtype or declaration");
  std::unique_ptr<CudaModelRunner> runner(
      new CudaModelRunner(std::move(runtime), config, plan, options));
  TESSERA_RETURN_IF_ERROR(runner->Initialize(std::move(weights), std::move(kernels)));
  return runner;
}

absl::Status CudaModelRunner::Initialize(std::unique_ptr<DeviceModelWeights> weights,
                                         std::unique_ptr<DeviceKernels> kernels) {
  if (kernels != nullptr) {
    kernels_ = std::move(kernels);
  } else {
    TESSERA_ASSIGN_OR_RETURN(kernels_, MakeDeviceKernels(*runtime_));
  }
  TESSERA_RETURN_IF_ERROR(kernels_->PrepareSampling(config_.vocab_size));
  TESSERA_RETURN_IF_ERROR(kernels_->PreparePackedLinear(options_.dtype));
  if (plan_.num_linear_layers > 0) {
    TESSERA_RETURN_IF_ERROR(kernels_->PrepareGatedDeltaRule(options_.dtype));
  }
  weights_ = std::move(weights);
  const int max_tokens = std::max(options_.max_num_batched_tokens, options_.max_num_seqs);
  const int table_stride = (config_.context_length + options_.block_size - 1) / options_.block_size;
  TESSERA_ASSIGN_OR_RETURN(DeviceBlockTables tables,
                           DeviceBlockTables::Create(*runtime_, options_.max_num_seqs,
                                                     table_stride, options_.max_num_seqs));
  tables_ = std::make_unique<DeviceBlockTables>(std::move(tables));
  const StepShape capacity{.num_tokens = max_tokens,
                           .num_decode = options_.max_num_seqs,
                           .num_prefill = options_.max_num_seqs,
                           .num_rows = options_.max_num_seqs};
  const int64_t penalty_capacity =
      int64_t{options_.max_num_seqs} * std::min(config_.vocab_size, config_.context_length);
  // A step may (re)send every table entry of each of its sequences.
  const int64_t delta_capacity = int64_t{options_.max_num_seqs} * table_stride;
  TESSERA_ASSIGN_OR_RETURN(DeviceStepInputs inputs,
                           DeviceStepInputs::Create(*runtime_, capacity, delta_capacity,
                                                    penalty_capacity,
                                                    (config_.vocab_size + 31) / 32));
  inputs_ = std::make_unique<DeviceStepInputs>(std::move(inputs));
  TESSERA_ASSIGN_OR_RETURN(
      sampling_workspace_,
      device::DeviceMemory::Allocate(
          *runtime_, cuda::SamplingWorkspaceBytes(options_.max_num_seqs, config_.vocab_size)));
  TESSERA_RETURN_IF_ERROR(AllocateRecurrentState());
  const DeviceOpsOptions ops_options{.batch_invariant = options_.batch_invariant,
                                     .max_tokens = max_tokens,
                                     .max_rows = options_.max_num_seqs,
                                     .num_sms = std::max(runtime_->properties().multiprocessor_count, 1),
                                     .decode_partition = options_.batch_invariant
                                                             ? 0
                                                             : options_.decode_partition,
                                     .packed_stream_grid = options_.packed_stream_grid,
                                     .communicator = options_.communicator};
  TESSERA_ASSIGN_OR_RETURN(ops_, DeviceModelOps::Create(*runtime_, *kernels_, config_, plan_,
                                                        *weights_, kv_, state_, ops_options));
  // Last: the pool takes what the weights, step buffers and activations left.
  TESSERA_RETURN_IF_ERROR(AllocateKvPool());
  TESSERA_ASSIGN_OR_RETURN(step_start_, runtime_->CreateEvent());
  TESSERA_ASSIGN_OR_RETURN(step_end_, runtime_->CreateEvent());
  pieces_ = std::make_unique<StepPieces>(runtime_.get());
  graphs_ = std::make_unique<GraphCache>(runtime_.get(), options_.graphs, options_.max_num_seqs,
                                         options_.mixed_step_graphs ? pieces_.get() : nullptr,
                                         max_tokens);
  forward_graphs_ = std::make_unique<GraphCache>(
      runtime_.get(),
      options_.graphs == CudaGraphMode::kOff ? CudaGraphMode::kOff : CudaGraphMode::kLazy,
      options_.max_num_seqs);
  TESSERA_RETURN_IF_ERROR(CaptureEagerGraphs());
  return runtime_->Synchronize();
}

int64_t CudaModelRunner::KvBlockBytes() const {
  return int64_t{2} * plan_.num_attention_layers * options_.block_size * config_.num_kv_heads *
         config_.head_dim * static_cast<int64_t>(device::DataTypeBytes(options_.dtype));
}

absl::StatusOr<int64_t> CudaModelRunner::KvBlocksToAllocate(int64_t block_bytes) {
  if (options_.num_kv_blocks > 0) return options_.num_kv_blocks;
  if (options_.kv_cache_bytes > 0) return options_.kv_cache_bytes / block_bytes;
  TESSERA_ASSIGN_OR_RETURN(const uint64_t free_bytes, runtime_->FreeMemoryBytes());
  const double total = static_cast<double>(runtime_->properties().total_memory_bytes);
  const double used = total - static_cast<double>(free_bytes);
  const double budget = total * options_.gpu_memory_utilization - used;
  const int64_t blocks = budget > 0 ? static_cast<int64_t>(budget) / block_bytes : 0;
  const int64_t one_sequence =
      (config_.context_length + options_.block_size - 1) / options_.block_size + 1;
  if (blocks < one_sequence) {
    constexpr double kMiB = 1 << 20;
    return absl::ResourceExhaustedError(absl::StrFormat(
        "too little device memory for the KV cache: %.1f MiB of the %.1f MiB that "
        "--gpu-memory-utilization %.2f allows are left after weights and buffers (%.1f MiB); "
        "one %d-token sequence needs %.1f MiB",
        std::max(budget, 0.0) / kMiB, total * options_.gpu_memory_utilization / kMiB,
        options_.gpu_memory_utilization, used / kMiB, config_.context_length,
        static_cast<double>(one_sequence * block_bytes) / kMiB));
  }
  return blocks;
}

absl::Status CudaModelRunner::AllocateKvPool() {
  const int64_t block_bytes = KvBlockBytes();
  TESSERA_ASSIGN_OR_RETURN(const int64_t blocks, KvBlocksToAllocate(block_bytes));
  if (blocks < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the KV cache holds ", blocks, " blocks of ", block_bytes,
        " bytes; it needs the null block and at least one more"));
  }
  // One allocation per layer's K and per layer's V: on the emulated device each is fenced by
  // guard pages, so a negative block id or an overrun of one layer's pool faults instead of
  // reading a neighbouring layer (kernels/simt/device_memory.h).
  kv_ = {.num_blocks = blocks, .block_size = options_.block_size};
  const size_t pool_bytes = static_cast<size_t>(block_bytes / (2 * plan_.num_attention_layers)) * blocks;
  kv_memory_.clear();
  for (int p = 0; p < 2 * plan_.num_attention_layers; ++p) {
    TESSERA_ASSIGN_OR_RETURN(device::DeviceMemory pool,
                             device::DeviceMemory::Allocate(*runtime_, pool_bytes));
    // Zeroed: padding rows of batch-invariant decode graphs read the null block 0.
    TESSERA_RETURN_IF_ERROR(runtime_->Fill(pool.data(), 0, pool.bytes()));
    (p % 2 == 0 ? kv_.k : kv_.v).push_back(pool.data());
    kv_memory_.push_back(std::move(pool));
  }
  return absl::OkStatus();
}

KvPoolInfo CudaModelRunner::kv_pool() const {
  return {.block_size = options_.block_size,
          .num_blocks = kv_.num_blocks,
          .bytes = kv_.num_blocks * KvBlockBytes()};
}

int64_t CudaModelRunner::activation_bytes() const { return ops_->activation_bytes(); }

int64_t CudaModelRunner::DecodeStepWeightBytes() const {
  int64_t bytes = 0;
  for (WeightId id = 0; id < plan_.weights.size(); ++id) {
    const WeightSpec& spec = plan_.weights.spec(id);
    const DeviceWeight& w = (*weights_)[id];
    if (spec.role == WeightRole::kMatrix) bytes += w.bytes;
    if (spec.role == WeightRole::kExperts && config_.hybrid && config_.hybrid->moe) {
      bytes += w.bytes * config_.hybrid->moe->num_experts_used / std::max<int64_t>(w.experts, 1);
    }
  }
  return bytes;
}

std::string CudaModelRunner::DeviceDescription() const {
  const device::DeviceProperties& p = runtime_->properties();
  const bool every_block =
      options_.packed_stream_grid == cuda::PackedStreamGrid::kEveryResidentBlock;
  return absl::StrFormat("%s %s, %.1f GiB, %s%s, graphs %s%s", DeviceKindName(runtime_->kind()),
                         p.name, static_cast<double>(p.total_memory_bytes) / (1 << 30),
                         device::DataTypeName(options_.dtype),
                         options_.batch_invariant ? ", batch-invariant" : "",
                         CudaGraphModeName(options_.graphs),
                         every_block ? ", packed GEMM over every resident block" : "");
}

void CudaModelRunner::BeginSequence(int slot, const sampling::SamplingParams& params,
                                    std::span<const int32_t> prompt,
                                    std::span<const int32_t> generated) {
  sampling_.Begin(slot, params, prompt, generated);
  tables_->Reset(slot);  // a new sequence: its whole table goes over with its first step
  ClearState(slot);      // a new or re-admitted sequence recomputes from its first token
}

void CudaModelRunner::EndSequence(int slot) {
  sampling_.End(slot);
  ClearState(slot);
}

absl::Status CudaModelRunner::Validate(std::span<const SequenceWork> batch, bool sampling) {
  const BatchLimits limits{.block_size = options_.block_size,
                           .num_blocks = kv_.num_blocks,
                           .max_tokens = std::max(options_.max_num_batched_tokens,
                                                  options_.max_num_seqs),
                           .max_sequences = options_.max_num_seqs,
                           .recurrent_slots =
                               plan_.num_linear_layers > 0 ? options_.max_num_seqs : 0};
  std::function<bool(int32_t)> started;
  if (sampling) started = [this](int32_t slot) { return sampling_.started(slot); };
  TESSERA_RETURN_IF_ERROR(ValidateStepBatch(batch, config_, limits, started));
  // Block tables live on the device per slot: every sequence needs its own.
  std::vector<bool>& seen = slot_seen_;
  seen.assign(options_.max_num_seqs, false);
  for (size_t i = 0; i < batch.size(); ++i) {
    const int32_t slot = batch[i].slot;
    const bool in_range = slot >= 0 && slot < options_.max_num_seqs;
    if (!in_range || seen[slot]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "batch[", i, "]: slot ", slot, in_range ? " is used twice" : " is out of range",
          " (every sequence needs its own slot in [0, ", options_.max_num_seqs, "))"));
    }
    seen[slot] = true;
  }
  return absl::OkStatus();
}

}  // namespace tessera::worker
