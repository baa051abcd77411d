#include "worker/parallel/tensor_parallel_runner.h"

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/util/check.h"
#include "common/model/hybrid_tensors.h"
#include "common/util/status_macros.h"
#include "kernels/cuda/device_query.h"
#include "kernels/device/emulated_device_runtime.h"
#include "worker/parallel/in_process_communicator.h"
#include "worker/parallel/weight_sharding.h"

#if TESSERA_WITH_CUDA
#include "kernels/device/cuda_device_runtime.h"
#include "worker/parallel/nccl_communicator.h"
#endif

namespace tessera::worker {

// One rank's thread: runs the job it is handed, then waits for the next.
class RankThread {
 public:
  RankThread() : thread_([this] { Loop(); }) {}
  ~RankThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    posted_.notify_all();
    thread_.join();
  }
  void Post(std::function<void()> job) {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = std::move(job);
    done_ = false;
    posted_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    finished_.wait(lock, [&] { return done_; });
  }

 private:
  void Loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        posted_.wait(lock, [&] { return stop_ || job_ != nullptr; });
        if (job_ == nullptr) return;
        job = std::exchange(job_, nullptr);
      }
      job();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        done_ = true;
      }
      finished_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable posted_, finished_;
  std::function<void()> job_;
  bool done_ = true;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the state above exists
};

namespace {

// Opened once rank 0 has filled the step's pending masks (or has finished the step).
class MaskGate {
 public:
  void Open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    opened_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    opened_.wait(lock, [&] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = false;
};

absl::Status CheckDeviceCount(const TensorParallelOptions& options) {
  if (options.device.kind != device::DeviceKind::kCuda) return absl::OkStatus();
  absl::StatusOr<std::vector<cuda::CudaDeviceInfo>> devices = cuda::QueryCudaDevices();
  if (!devices.ok()) return devices.status();
  const int first = options.device.cuda_device_index;
  const int count = static_cast<int>(devices->size());
  if (first + options.size <= count) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--tensor-parallel ", options.size, " needs GPUs ", first, "..", first + options.size - 1,
      "; this machine has ", count, count == 1 ? " GPU" : " GPUs"));
}

absl::StatusOr<std::vector<std::unique_ptr<device::DeviceRuntime>>> OpenRankDevices(
    const TensorParallelOptions& options) {
  TESSERA_RETURN_IF_ERROR(CheckDeviceCount(options));
  std::vector<std::unique_ptr<device::DeviceRuntime>> runtimes;
  for (int r = 0; r < options.size; ++r) {
    device::DeviceOptions rank_device = options.device;
    rank_device.cuda_device_index += r;
    absl::StatusOr<std::unique_ptr<device::DeviceRuntime>> runtime = device::OpenDevice(rank_device);
    if (!runtime.ok()) {
      return absl::Status(runtime.status().code(), absl::StrCat("tensor parallel rank ", r, ": ",
                                                                runtime.status().message()));
    }
    runtimes.push_back(*std::move(runtime));
  }
  return runtimes;
}

absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> MakeCommunicators(
    const std::vector<std::unique_ptr<device::DeviceRuntime>>& runtimes) {
  if (runtimes[0]->kind() == device::DeviceKind::kEmulated) {
    std::vector<device::EmulatedDeviceRuntime*> emulated;
    for (const auto& runtime : runtimes) {
      emulated.push_back(static_cast<device::EmulatedDeviceRuntime*>(runtime.get()));
    }
    return MakeInProcessCommunicators(emulated);
  }
#if TESSERA_WITH_CUDA
  std::vector<device::CudaDeviceRuntime*> gpus;
  for (const auto& runtime : runtimes) {
    gpus.push_back(static_cast<device::CudaDeviceRuntime*>(runtime.get()));
  }
  return MakeNcclCommunicators(gpus);
#else
  return absl::UnavailableError("tensor parallelism on cuda: this build has no CUDA");
#endif
}

// Runs build(r) for every rank on its own thread at once (a rank's start-up may capture graphs,
// whose warm-up runs meet the other ranks in collectives); a failure aborts the collectives.
absl::Status OnRankThreads(int size, const std::vector<std::unique_ptr<Communicator>>& comms,
                           const std::function<absl::Status(int)>& build) {
  std::vector<absl::Status> results(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      results[r] = build(r);
      if (!results[r].ok()) {
        for (const auto& comm : comms) comm->Abort();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const absl::Status& result : results) TESSERA_RETURN_IF_ERROR(result);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TensorParallelRunner>> TensorParallelRunner::Create(
    const TensorParallelOptions& options, const LoadedModel& model) {
  TESSERA_ASSIGN_OR_RETURN(const model::ModelConfig shard_config,
                           ShardModelConfig(model.config, options.size));
  model::HybridTensorForms forms;
  if (model.config.hybrid.has_value()) {
    TESSERA_ASSIGN_OR_RETURN(forms, model::CheckHybridTensors(*model.file, model.config));
  }
  TESSERA_ASSIGN_OR_RETURN(const ModelPlan shard_plan, PlanModel(shard_config, forms));
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<device::DeviceRuntime>> runtimes,
                           OpenRankDevices(options));
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Communicator>> communicators,
                           MakeCommunicators(runtimes));
  std::vector<std::unique_ptr<CudaModelRunner>> ranks(static_cast<size_t>(options.size));
  TESSERA_RETURN_IF_ERROR(OnRankThreads(options.size, communicators, [&](int r) -> absl::Status {
    absl::StatusOr<std::unique_ptr<HostModelWeights>> weights =
        ShardWeights(model.plan.weights, *model.weights, shard_plan.weights, r, options.size);
    if (!weights.ok()) return weights.status();
    CudaRunnerOptions rank_options = options.runner;
    rank_options.communicator = communicators[r].get();
    absl::StatusOr<std::unique_ptr<CudaModelRunner>> runner = CudaModelRunner::Create(
        std::move(runtimes[r]), shard_config, shard_plan, **weights, rank_options);
    if (!runner.ok()) {
      return absl::Status(runner.status().code(), absl::StrCat("tensor parallel rank ", r, ": ",
                                                               runner.status().message()));
    }
    ranks[r] = *std::move(runner);
    return absl::OkStatus();
  }));
  return std::unique_ptr<TensorParallelRunner>(
      new TensorParallelRunner(model.config, std::move(communicators), std::move(ranks)));
}

TensorParallelRunner::TensorParallelRunner(const model::ModelConfig& config,
                                           std::vector<std::unique_ptr<Communicator>> communicators,
                                           std::vector<std::unique_ptr<CudaModelRunner>> ranks)
    : config_(config), communicators_(std::move(communicators)), ranks_(std::move(ranks)) {
  for (size_t r = 1; r < ranks_.size(); ++r) threads_.push_back(std::make_unique<RankThread>());
  rank_samples_.resize(threads_.size());
  rank_logits_.resize(threads_.size());
}

TensorParallelRunner::~TensorParallelRunner() {
  threads_.clear();  // joined before the ranks they ran go
}

KvPoolInfo TensorParallelRunner::kv_pool() const {
  KvPoolInfo pool = ranks_[0]->kv_pool();
  pool.bytes = 0;
  for (const auto& rank : ranks_) {
    pool.num_blocks = std::min(pool.num_blocks, rank->kv_pool().num_blocks);
    pool.bytes += rank->kv_pool().bytes;
  }
  return pool;
}

void TensorParallelRunner::BeginSequence(int slot, const sampling::SamplingParams& params,
                                         std::span<const int32_t> prompt,
                                         std::span<const int32_t> generated) {
  for (const auto& rank : ranks_) rank->BeginSequence(slot, params, prompt, generated);
}

void TensorParallelRunner::EndSequence(int slot) {
  for (const auto& rank : ranks_) rank->EndSequence(slot);
}

void TensorParallelRunner::SaveStateSnapshot(int slot, int snapshot) {
  for (const auto& rank : ranks_) rank->SaveStateSnapshot(slot, snapshot);
}

void TensorParallelRunner::RestoreStateSnapshot(int snapshot, int slot) {
  for (const auto& rank : ranks_) rank->RestoreStateSnapshot(snapshot, slot);
}

void TensorParallelRunner::AbortCollectives() {
  for (const auto& communicator : communicators_) communicator->Abort();
}

absl::Status TensorParallelRunner::OnEveryRank(const std::function<absl::Status(int)>& work) {
  std::vector<absl::Status> results(ranks_.size());
  const auto run = [&](int r) {
    results[r] = work(r);
    if (!results[r].ok()) AbortCollectives();
  };
  for (size_t r = 1; r < ranks_.size(); ++r) {
    threads_[r - 1]->Post([&run, r] { run(static_cast<int>(r)); });
  }
  run(0);
  for (const auto& thread : threads_) thread->Wait();
  for (size_t r = 0; r < results.size(); ++r) {
    if (results[r].ok()) continue;
    broken_ = absl::Status(results[r].code(),
                           absl::StrCat("tensor parallel rank ", r, " failed (the worker must be "
                                        "restarted): ", results[r].message()));
    return broken_;
  }
  return absl::OkStatus();
}

void TensorParallelRunner::CheckSameTokens(const StepSamples& rank0, const StepSamples& other,
                                           int rank) {
  TESSERA_CHECK(other.rows.size() == rank0.rows.size(),
                absl::StrCat("tensor parallel: rank ", rank, " sampled ", other.rows.size(),
                             " rows where rank 0 sampled ", rank0.rows.size()).c_str());
  for (size_t i = 0; i < rank0.rows.size(); ++i) {
    TESSERA_CHECK(other.rows[i].token == rank0.rows[i].token,
                  absl::StrCat("tensor parallel: rank ", rank, " sampled token ",
                               other.rows[i].token, " where rank 0 sampled ",
                               rank0.rows[i].token, " (row ", i, ")").c_str());
  }
}

absl::Status TensorParallelRunner::Step(std::span<const SequenceWork> batch, StepSamples* samples,
                                        const FillPendingMasks& fill_pending_masks) {
  if (!broken_.ok()) return broken_;
  TESSERA_RETURN_IF_ERROR(ranks_[0]->Validate(batch, /*sampling=*/true));
  MaskGate masks;
  FillPendingMasks fill_then_open, wait_for_masks;
  if (fill_pending_masks) {
    fill_then_open = [&] {
      fill_pending_masks();
      masks.Open();
    };
    wait_for_masks = [&] { masks.Wait(); };
  }
  TESSERA_RETURN_IF_ERROR(OnEveryRank([&](int r) {
    if (r > 0) return ranks_[r]->Step(batch, &rank_samples_[r - 1], wait_for_masks);
    absl::Status status = ranks_[0]->Step(batch, samples, fill_then_open);
    masks.Open();  // a rank 0 that failed before filling must not leave the others waiting
    return status;
  }));
  for (size_t r = 1; r < ranks_.size(); ++r) {
    CheckSameTokens(*samples, rank_samples_[r - 1], static_cast<int>(r));
  }
  return absl::OkStatus();
}

absl::Status TensorParallelRunner::Forward(std::span<const SequenceWork> batch,
                                           StepLogits* logits) {
  if (!broken_.ok()) return broken_;
  TESSERA_RETURN_IF_ERROR(ranks_[0]->Validate(batch, /*sampling=*/false));
  return OnEveryRank([&](int r) {
    return ranks_[r]->Forward(batch, r == 0 ? logits : &rank_logits_[r - 1]);
  });
}

std::string TensorParallelRunner::Describe() const {
  return absl::StrCat(size(), " ranks (", communicators_[0]->Describe(), "): ",
                      ranks_[0]->DeviceDescription());
}

}  // namespace tessera::worker
