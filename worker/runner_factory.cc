#include "worker/runner_factory.h"

#include <algorithm>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/util/absl_compat.h"
#include "common/util/status_macros.h"
#include "kernels/cpu/isa.h"
#include "kernels/device/device_runtime.h"
#include "worker/cpu/cpu_model_runner.h"
#include "worker/cpu/int8_packed_weights.h"

#if TESSERA_WITH_DEVICE_BACKENDS
#include "worker/cuda/cuda_model_runner.h"
#include "worker/cuda/dummy_model_weights.h"
#include "worker/parallel/tensor_parallel_runner.h"
#endif

namespace tessera::worker {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kCpuDefaultKvMb = 2048;

absl::StatusOr<int64_t> CpuKvBlocks(const RunnerFlags& flags, const LoadedModel& model,
                                    kernels::cpu::KvDtype dtype) {
  if (flags.num_kv_blocks > 0) return flags.num_kv_blocks;
  const int64_t mb = flags.kv_cache_mb > 0 ? flags.kv_cache_mb : kCpuDefaultKvMb;
  const int64_t block_bytes =
      CpuModelRunner::KvBlockBytes(model.plan, model.config, flags.block_size, dtype);
  const int64_t blocks = mb * kMiB / block_bytes;
  if (blocks < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kv-cache-mb ", mb, " holds ", blocks, " KV blocks of ", block_bytes,
        " bytes; at least 2 are needed (block 0 is reserved)"));
  }
  return blocks;
}

absl::StatusOr<BuiltRunner> BuildCpuRunner(const RunnerFlags& flags, const LoadedModel& model) {
  if (!flags.dtype.empty() && flags.dtype != "f32") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dtype ", flags.dtype, " is for the cuda backend; the cpu backend computes in f32 "
        "(see --activations and --kv-cache-dtype)"));
  }
  TESSERA_ASSIGN_OR_RETURN(const MatmulActivations activations,
                           ParseMatmulActivations(flags.activations));
  TESSERA_ASSIGN_OR_RETURN(const kernels::cpu::KvDtype kv_dtype,
                           ParseKvDtype(flags.kv_cache_dtype));
  if (activations == MatmulActivations::kInt8) {
    TESSERA_RETURN_IF_ERROR(CheckInt8Packable(model.plan.weights, *model.weights));
  }
  TESSERA_ASSIGN_OR_RETURN(const int64_t num_blocks, CpuKvBlocks(flags, model, kv_dtype));
  const int threads = flags.threads > 0
                          ? flags.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  BuiltRunner built;
  built.pool = std::make_unique<kernels::cpu::ThreadPool>(threads);
  built.runner = std::make_unique<CpuModelRunner>(
      model.config, &model.plan, model.weights.get(), built.pool.get(),
      CpuRunnerOptions{.block_size = flags.block_size,
                       .num_kv_blocks = num_blocks,
                       .activations = activations,
                       .kv_dtype = kv_dtype,
                       .max_num_seqs = flags.max_num_seqs,
                       .state_snapshot_bytes = flags.state_snapshot_mb * kMiB});
  built.description = absl::StrCat(
      "cpu: ", threads, threads == 1 ? " thread, " : " threads, ",
      util::ToAbsl(kernels::cpu::IsaName(kernels::cpu::BestIsa())), ", ",
      util::ToAbsl(MatmulActivationsName(activations)), " activations, ",
      util::ToAbsl(KvDtypeName(kv_dtype)), " KV");
  return built;
}

#if TESSERA_WITH_DEVICE_BACKENDS
absl::StatusOr<cuda::PackedStreamGrid> ParsePackedStreamGrid(const std::string& name) {
  if (name == "tile") return cuda::PackedStreamGrid::kBlockPerTileWhenTilesFit;
  if (name == "every") return cuda::PackedStreamGrid::kEveryResidentBlock;
  return absl::InvalidArgumentError(
      absl::StrCat("--cuda-packed-stream-grid: '", name, "' is neither tile nor every"));
}

absl::StatusOr<CudaRunnerOptions> DeviceRunnerOptions(const RunnerFlags& flags) {
  TESSERA_ASSIGN_OR_RETURN(const device::DataType dtype,
                           ParseComputeDtype(flags.dtype.empty() ? "bf16" : flags.dtype));
  TESSERA_ASSIGN_OR_RETURN(const cuda::PackedStreamGrid stream_grid,
                           ParsePackedStreamGrid(flags.cuda_packed_stream_grid));
  const std::string graph_mode =
      !flags.cuda_graphs.empty() ? flags.cuda_graphs : flags.device == "emulated" ? "lazy" : "eager";
  TESSERA_ASSIGN_OR_RETURN(const CudaGraphMode graphs, ParseCudaGraphMode(graph_mode));
  return CudaRunnerOptions{.dtype = dtype,
                           .block_size = flags.block_size,
                           .num_kv_blocks = flags.num_kv_blocks,
                           .kv_cache_bytes = flags.kv_cache_mb * kMiB,
                           .gpu_memory_utilization = flags.gpu_memory_utilization,
                           .max_num_seqs = flags.max_num_seqs,
                           .max_num_batched_tokens = flags.max_num_batched_tokens,
                           .graphs = graphs,
                           .batch_invariant = flags.batch_invariant,
                           .keep_weights_packed = !flags.dequantize_weights,
                           .decode_partition = 0,
                           .packed_stream_grid = stream_grid,
                           .mixed_step_graphs = !flags.no_mixed_graphs,
                           .state_snapshot_bytes = flags.state_snapshot_mb * kMiB};
}

BuiltRunner DescribeDeviceRunner(const RunnerFlags& flags,
                                 std::unique_ptr<CudaModelRunner> runner) {
  BuiltRunner built;
  built.description = absl::StrCat("cuda: ", runner->DeviceDescription());
  const std::vector<int>& buckets = runner->graphs().buckets();
  if (runner->options().graphs != CudaGraphMode::kOff) {
    built.graph_buckets.assign(buckets.begin(), buckets.end());
  }
  built.has_device = true;
  built.max_num_batched_tokens = std::max(flags.max_num_batched_tokens, flags.max_num_seqs);
  built.device_memory_bytes = runner->runtime().properties().total_memory_bytes;
  built.weights_bytes = runner->device_weights().bytes;
  built.weights_load_seconds = runner->device_weights().load_seconds;
  built.weight_storage = runner->device_weights().formats;
  built.decode_weight_bytes = runner->DecodeStepWeightBytes();
  built.runner = std::move(runner);
  return built;
}

// The model file's weights over flags.tensor_parallel devices, the first being `runtime`'s kind
// (closed here: each rank opens its own).
absl::StatusOr<BuiltRunner> BuildTensorParallelRunner(
    const RunnerFlags& flags, const LoadedModel& model,
    std::unique_ptr<device::DeviceRuntime> runtime) {
  TESSERA_ASSIGN_OR_RETURN(const CudaRunnerOptions options, DeviceRunnerOptions(flags));
  const device::DeviceKind kind = runtime->kind();
  runtime.reset();
  TensorParallelOptions tp{.size = flags.tensor_parallel,
                           .device = {.kind = kind,
                                      .cuda_device_index = flags.cuda_device,
                                      .cuda_sync_each_launch = flags.cuda_sync_each_launch,
                                      .cuda_dependent_launch = flags.cuda_dependent_launch,
                                      .emulated_memory_bytes =
                                          static_cast<uint64_t>(flags.emulated_memory_mb) * kMiB},
                           .runner = options};
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<TensorParallelRunner> runner,
                           TensorParallelRunner::Create(tp, model));
  BuiltRunner built;
  built.description = absl::StrCat("cuda: tensor parallel, ", runner->Describe());
  const CudaModelRunner& rank0 = runner->rank(0);
  if (rank0.options().graphs != CudaGraphMode::kOff) {
    built.graph_buckets.assign(rank0.graphs().buckets().begin(), rank0.graphs().buckets().end());
  }
  built.has_device = true;
  built.max_num_batched_tokens = std::max(flags.max_num_batched_tokens, flags.max_num_seqs);
  built.weight_storage = rank0.device_weights().formats;
  for (int r = 0; r < runner->size(); ++r) {
    const CudaModelRunner& rank = runner->rank(r);
    built.device_memory_bytes += rank.runtime().properties().total_memory_bytes;
    built.weights_bytes += rank.device_weights().bytes;
    built.weights_load_seconds = std::max(built.weights_load_seconds,
                                          rank.device_weights().load_seconds);
    built.decode_weight_bytes += rank.DecodeStepWeightBytes();
  }
  built.runner = std::move(runner);
  return built;
}

// The model file's weights, uploaded (reporting to `progress`, when set, on one device; the
// ranks of a tensor-parallel worker load concurrently and report nothing).
absl::StatusOr<BuiltRunner> BuildDeviceRunner(const RunnerFlags& flags, const LoadedModel& model,
                                              std::unique_ptr<device::DeviceRuntime> runtime,
                                              util::LoadProgress* progress) {
  if (flags.tensor_parallel > 1) {
    return BuildTensorParallelRunner(flags, model, std::move(runtime));
  }
  TESSERA_ASSIGN_OR_RETURN(CudaRunnerOptions options, DeviceRunnerOptions(flags));
  options.progress = progress;
  TESSERA_ASSIGN_OR_RETURN(
      std::unique_ptr<CudaModelRunner> runner,
      CudaModelRunner::Create(std::move(runtime), model.config, model.plan, *model.weights,
                              options, model.file.get()));
  return DescribeDeviceRunner(flags, std::move(runner));
}

// --dummy-weight-format: nullopt for "", else the packed scheme of that name.
absl::StatusOr<std::optional<cuda::PackedScheme>> ParseDummyWeightFormat(const std::string& name) {
  if (name.empty()) return std::nullopt;
  for (int s = 0; s <= static_cast<int>(cuda::PackedScheme::kMxfp4); ++s) {
    const auto scheme = static_cast<cuda::PackedScheme>(s);
    if (name == cuda::PackedSchemeName(scheme)) return scheme;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown --dummy-weight-format '", name,
                                                 "' (expected q8_0, q4_0, q4_1, q4_k, nvfp4 or "
                                                 "mxfp4)"));
}

// Random weights of the shape, made on the device.
absl::StatusOr<BuiltRunner> BuildDummyDeviceRunner(const RunnerFlags& flags,
                                                   const model::SyntheticModel& model,
                                                   std::unique_ptr<device::DeviceRuntime> runtime) {
  TESSERA_ASSIGN_OR_RETURN(const CudaRunnerOptions options, DeviceRunnerOptions(flags));
  TESSERA_ASSIGN_OR_RETURN(const std::optional<cuda::PackedScheme> packed,
                           ParseDummyWeightFormat(flags.dummy_weight_format));
  TESSERA_ASSIGN_OR_RETURN(const std::unique_ptr<DeviceKernels> kernels,
                           MakeDeviceKernels(*runtime));
  TESSERA_ASSIGN_OR_RETURN(const ModelPlan plan, PlanModel(model.config));
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<DeviceModelWeights> weights,
                           MakeDummyModelWeights(*runtime, *kernels, plan.weights, model,
                                                 options.dtype, flags.dummy_seed, packed));
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<CudaModelRunner> runner,
                           CudaModelRunner::Create(std::move(runtime), model.config, plan,
                                                   std::move(weights), options));
  BuiltRunner built = DescribeDeviceRunner(flags, std::move(runner));
  built.synthetic = model;
  return built;
}
#endif

// Builds on an opened device runtime (cuda or emulated); a build without device backends has
// none to open.
using DeviceBuild =
    std::function<absl::StatusOr<BuiltRunner>(std::unique_ptr<device::DeviceRuntime>)>;

absl::StatusOr<std::unique_ptr<device::DeviceRuntime>> OpenRuntime(const RunnerFlags& flags,
                                                                   device::DeviceKind kind) {
#if TESSERA_WITH_DEVICE_BACKENDS
  device::DeviceOptions options{.kind = kind,
                                .cuda_device_index = flags.cuda_device,
                                .cuda_sync_each_launch = flags.cuda_sync_each_launch,
                                .cuda_dependent_launch = flags.cuda_dependent_launch,
                                .emulated_memory_bytes =
                                    static_cast<uint64_t>(flags.emulated_memory_mb) * kMiB};
  return device::OpenDevice(options);
#else
  (void)flags;
  (void)kind;
  return absl::UnavailableError("this build has no device backends (no CUDA headers)");
#endif
}

absl::StatusOr<BuiltRunner> BuildOnDevice(const RunnerFlags& flags, device::DeviceKind kind,
                                          const DeviceBuild& build) {
  absl::StatusOr<std::unique_ptr<device::DeviceRuntime>> runtime = OpenRuntime(flags, kind);
  if (!runtime.ok()) {
    return absl::Status(runtime.status().code(),
                        absl::StrCat("--device ", util::ToAbsl(DeviceKindName(kind)), ": ",
                                     runtime.status().message()));
  }
  return build(*std::move(runtime));
}

// --device cuda, emulated or auto on `build`; `without_cuda` answers auto when no CUDA device
// opens (the runtime's error).
absl::StatusOr<BuiltRunner> BuildOnSelectedDevice(
    const RunnerFlags& flags, const DeviceBuild& build,
    const std::function<absl::StatusOr<BuiltRunner>(const absl::Status&)>& without_cuda) {
  if (flags.device == "cuda") return BuildOnDevice(flags, device::DeviceKind::kCuda, build);
  if (flags.device == "emulated") {
    return BuildOnDevice(flags, device::DeviceKind::kEmulated, build);
  }
  if (flags.device != "auto") {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown --device '", flags.device, "' (expected auto, cpu, cuda or emulated)"));
  }
  absl::StatusOr<std::unique_ptr<device::DeviceRuntime>> runtime =
      OpenRuntime(flags, device::DeviceKind::kCuda);
  if (!runtime.ok()) return without_cuda(runtime.status());
  const std::string name = (*runtime)->properties().name;
  TESSERA_ASSIGN_OR_RETURN(BuiltRunner built, build(*std::move(runtime)));
  built.selection = absl::StrCat("--device auto: CUDA device ", name, "; using cuda");
  return built;
}

// The device builds of both load formats (a build without device backends never opens a
// runtime to call them with).
DeviceBuild FileBuild(const RunnerFlags& flags, const LoadedModel& model,
                      util::LoadProgress* progress) {
  return [&flags, &model, progress](std::unique_ptr<device::DeviceRuntime> runtime)
             -> absl::StatusOr<BuiltRunner> {
#if TESSERA_WITH_DEVICE_BACKENDS
    return BuildDeviceRunner(flags, model, std::move(runtime), progress);
#else
    return absl::UnavailableError("this build has no device backends");
#endif
  };
}

DeviceBuild DummyBuild(const RunnerFlags& flags, const model::SyntheticModel& model) {
  return [&flags, &model](std::unique_ptr<device::DeviceRuntime> runtime)
             -> absl::StatusOr<BuiltRunner> {
#if TESSERA_WITH_DEVICE_BACKENDS
    return BuildDummyDeviceRunner(flags, model, std::move(runtime));
#else
    return absl::UnavailableError("this build has no device backends");
#endif
  };
}

}  // namespace

absl::StatusOr<bool> IsDummyLoadFormat(const std::string& load_format) {
  if (load_format == "auto") return false;
  if (load_format == "dummy") return true;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --load-format '", load_format, "' (expected auto or dummy)"));
}

absl::StatusOr<BuiltRunner> BuildRunner(const RunnerFlags& flags, const LoadedModel& model,
                                        util::LoadProgress* progress) {
  if (flags.tensor_parallel < 1) {
    return absl::InvalidArgumentError("--tensor-parallel must be at least 1");
  }
  if (flags.tensor_parallel > 1 && flags.device != "cuda" && flags.device != "emulated") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tensor-parallel ", flags.tensor_parallel, " needs --device cuda or emulated (got ",
        flags.device, ")"));
  }
  if (flags.device == "cpu") return BuildCpuRunner(flags, model);
  return BuildOnSelectedDevice(
      flags, FileBuild(flags, model, progress),
      [&](const absl::Status& no_cuda) -> absl::StatusOr<BuiltRunner> {
        TESSERA_ASSIGN_OR_RETURN(BuiltRunner built, BuildCpuRunner(flags, model));
        built.selection = absl::StrCat("--device auto: ", no_cuda.message(), "; using cpu");
        return built;
      });
}

absl::StatusOr<BuiltRunner> BuildDummyRunner(const RunnerFlags& flags) {
  absl::StatusOr<model::SyntheticModel> model =
      model::MakeSyntheticModel(flags.dummy_shape, flags.dummy_vocab);
  if (!model.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--load-format dummy: ", model.status().message()));
  }
  if (flags.tensor_parallel != 1) {
    return absl::InvalidArgumentError(
        "--load-format dummy runs on one device; --tensor-parallel needs a model file");
  }
  if (flags.device == "cpu") {
    return absl::InvalidArgumentError(
        "--load-format dummy needs a device backend (--device cuda or emulated): its weights "
        "are generated on the device, and the cpu backend has none");
  }
  return BuildOnSelectedDevice(
      flags, DummyBuild(flags, *model),
      [](const absl::Status& no_cuda) -> absl::StatusOr<BuiltRunner> {
        return absl::Status(
            no_cuda.code(),
            absl::StrCat("--load-format dummy needs a device backend, and --device auto found "
                         "none (", no_cuda.message(), "); use --device emulated without a GPU"));
      });
}

}  // namespace tessera::worker
