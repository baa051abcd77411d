// Building the model runner a worker serves with, from its flags: `--device auto|cpu|cuda|
// emulated` picks the backend (auto = cuda when a CUDA device opens, else cpu, saying which and
// why), `--dtype` the cuda backend's compute type, and the KV pool / graph / batch-invariance
// options of each. `--load-format dummy` builds the runner on random weights of a named shape
// (common/model/synthetic_shapes.h) generated on the device, reading no model file. Shared by
// tessera-worker and `tessera generate --model` so the two select devices the same way. Errors
// are one line naming the problem (no GPU, too little memory, an architecture or weight type the
// backend cannot run, a bad value). Caller's thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/synthetic_shapes.h"
#include "common/util/load_progress.h"
#include "kernels/cpu/thread_pool.h"
#include "worker/loaded_model.h"
#include "worker/model_runner.h"
#include "worker/weight_storage.h"

namespace tessera::worker {

// The --device default the binaries apply when the flag is absent: $TESSERA_DEVICE (the test
// suites pin `cpu`), else RunnerFlags's "auto". Read by main(), passed in here.
inline constexpr char kDeviceEnvironment[] = "TESSERA_DEVICE";

struct RunnerFlags {
  std::string device = "auto";       // auto | cpu | cuda | emulated
  std::string dtype;                 // cuda/emulated: bf16 (default) | f16 | f32; cpu: f32 only
  int threads = 0;                   // cpu: kernel threads (0 = hardware threads)
  int block_size = 16;
  int64_t num_kv_blocks = 0;         // including the null block; 0 = from the size flags
  int64_t kv_cache_mb = 0;           // 0 = backend default (cpu 2048 MiB; cuda: utilization)
  // Recurrent-state snapshots for prefix caching on hybrid models (cpu); 0 = no snapshots, so
  // a hybrid shares no prefix.
  int64_t state_snapshot_mb = 512;
  double gpu_memory_utilization = 0.90;
  int max_num_seqs = 256;
  int max_num_batched_tokens = 2048;
  std::string activations = "f32";   // cpu matmul activations: f32 | int8
  std::string kv_cache_dtype = "f32";  // cpu KV pool: f32 | f16
  // lazy | eager | off; "" (default): eager on a GPU (every bucket at start-up: nothing is
  // captured while serving), lazy on the emulated device (fast start-up for tests).
  std::string cuda_graphs;
  bool no_mixed_graphs = false;      // steps with prefill rows run eagerly
  bool batch_invariant = false;      // cuda: batch-invariant kernels (cpu always is)
  bool dequantize_weights = false;   // cuda: quantized projections dequantized, not kept packed
  int cuda_device = 0;               // cuda: the device (the first of a tensor-parallel worker's)
  // cuda/emulated: ranks of one worker (worker/parallel/tensor_parallel_runner.h); 1 = one device.
  int tensor_parallel = 1;
  bool cuda_sync_each_launch = false;  // cuda: sync after every launch, naming a failed kernel
  bool cuda_dependent_launch = true;   // cuda: programmatic dependent launches (DeviceOptions)
  // cuda: how the batch-1 packed GEMM splits a projection whose row tiles fit the resident
  // blocks: "tile" (a block per tile) | "every" (every resident block; packed_stream_split.h).
  std::string cuda_packed_stream_grid = "tile";
  int64_t emulated_memory_mb = 1024; // the emulated device's memory
  std::string load_format = "auto";  // auto: weights from the model file; dummy: BuildDummyRunner
  std::string dummy_shape = "";      // dummy: a SyntheticShapeNames() entry
  int dummy_vocab = 0;               // dummy: vocabulary override (0 = the shape's)
  uint64_t dummy_seed = 0;           // dummy: the weights' seed
  std::string dummy_weight_format = {};// dummy: "" (the dtype) or a packed scheme: q4_0, nvfp4, ...
};

// "auto" -> false, "dummy" -> true; INVALID_ARGUMENT naming both otherwise.
absl::StatusOr<bool> IsDummyLoadFormat(const std::string& load_format);

struct BuiltRunner {
  std::unique_ptr<kernels::cpu::ThreadPool> pool;  // cpu backend only
  std::unique_ptr<ModelRunner> runner;
  std::string description;  // backend, device, dtype: "cuda: NVIDIA H100 ..., bf16, graphs lazy"
  std::string selection;    // why this backend ("--device auto: no CUDA GPU (...), using cpu")
  bool has_device = false;  // a device backend: GPU-busy time is meaningful
  std::vector<int32_t> graph_buckets;  // device backends' CUDA-graph decode buckets
  int max_num_batched_tokens = 0;      // tokens per step the runner holds; 0 = no limit
  uint64_t device_memory_bytes = 0;
  int64_t weights_bytes = 0;
  double weights_load_seconds = 0;
  std::vector<WeightStorage> weight_storage;  // device backends: how the weights are held
  int64_t decode_weight_bytes = 0;  // device backends: weight bytes a batch-1 decode step reads
  // --load-format dummy: the shape, whose BOS/EOS ids stand in for a tokenizer's.
  std::optional<model::SyntheticModel> synthetic;
};

// --load-format auto. The model must outlive the runner (the cpu runner borrows its weights).
// `progress` (borrowed, optional): a device backend's start-up phases (weights upload, eager
// graph capture) report to it.
absl::StatusOr<BuiltRunner> BuildRunner(const RunnerFlags& flags, const LoadedModel& model,
                                        util::LoadProgress* progress = nullptr);

// --load-format dummy: flags.dummy_shape (with flags.dummy_vocab) on a device backend, its
// weights made there (worker/cuda/dummy_model_weights.h) from flags.dummy_seed. Errors, one
// line: an unknown shape (listing the known ones), the cpu backend (it has no device to make
// them on), --device auto without a CUDA device, and BuildRunner's device errors.
absl::StatusOr<BuiltRunner> BuildDummyRunner(const RunnerFlags& flags);

}  // namespace tessera::worker
