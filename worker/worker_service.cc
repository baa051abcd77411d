#include "worker/worker_service.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_format.h"
#include "common/util/bearer_token.h"
#include "common/util/grpc_status.h"
#include "common/util/worker_handshake.h"

namespace tessera::worker {

// One long-lived thread that runs the closures handed to it, one at a time: the only thread
// that drives the executor and the runner (a CUDA runner will want its context on one thread).
class StepThread {
 public:
  StepThread() : thread_([this] { Loop(); }) {}

  ~StepThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // Runs fn on the step thread and returns when it finished. Callers queue on caller_mu_.
  void RunAndWait(absl::FunctionRef<void()> fn) {
    std::lock_guard<std::mutex> caller(caller_mu_);
    std::unique_lock<std::mutex> lock(mu_);
    job_ = &fn;
    cv_.notify_all();
    cv_.wait(lock, [this] { return job_ == nullptr; });
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return stop_ || job_ != nullptr; });
      if (job_ == nullptr) return;  // stop_ and nothing left to run
      lock.unlock();
      (*job_)();
      lock.lock();
      job_ = nullptr;
      cv_.notify_all();
    }
  }

  std::mutex caller_mu_;  // one RunAndWait at a time
  std::mutex mu_;
  std::condition_variable cv_;
  absl::FunctionRef<void()>* job_ = nullptr;  // guarded by mu_
  bool stop_ = false;                         // guarded by mu_
  std::thread thread_;                        // last: starts after the fields above exist
};

namespace {

std::string RandomWorkerId() {
  std::random_device device;
  const uint64_t bits = (uint64_t{device()} << 32) | device();
  return absl::StrFormat("w-%016x", bits);
}

v1::DescribeResponse BuildDescription(const ModelRunner& runner, const WorkerServiceOptions& options,
                              int max_logprobs) {
  const model::ModelConfig& config = runner.config();
  const KvPoolInfo kv = runner.kv_pool();
  v1::DescribeResponse d;
  d.set_worker_id(RandomWorkerId());
  d.set_model_name(options.model_name.empty() ? config.name : options.model_name);
  d.set_architecture(config.architecture);
  d.set_vocab_size(config.vocab_size);
  for (int32_t id : options.eos_token_ids) d.add_eos_token_ids(id);
  d.set_bos_token_id(options.bos_token_id);
  d.set_max_context(config.context_length);
  d.set_block_size(kv.block_size);
  d.set_num_kv_blocks(kv.num_blocks);
  d.set_max_num_seqs(options.max_num_seqs);
  d.set_kv_pool_bytes(kv.bytes);
  d.set_backend(runner.backend_name());
  d.set_device(options.device);
  d.set_max_num_batched_tokens(options.max_num_batched_tokens);
  for (int32_t bucket : options.graph_buckets) d.add_graph_buckets(bucket);
  d.set_device_memory_bytes(options.device_memory_bytes);
  d.set_weights_bytes(options.weights_bytes);
  d.set_weights_load_seconds(options.weights_load_seconds);
  for (const WeightStorage& storage : options.weight_storage) {
    v1::WeightStorage* out = d.add_weight_storage();
    out->set_format(storage.format);
    out->set_packed(storage.packed);
    out->set_tensors(storage.tensors);
    out->set_parameters(storage.parameters);
    out->set_bytes(storage.bytes);
  }
  // What a plan may ask for: logprobs/top-N, penalties, per-request seeds, prompts split over
  // steps, prefix-cache hits (num_cached_tokens), re-admission with generated tokens.
  for (const char* feature : {"logprobs", "penalties", "seed", "chunked_prefill", "preemption"}) {
    d.add_features(feature);
  }
  // A hybrid model's linear-attention layers need their recurrent state at a cached prefix's
  // end: it shares prefixes only through state snapshots (DESIGN.md §4), and none without them.
  // A property of the runner's model, never a name the worker tests (DESIGN.md §5).
  const ModelLayerInfo layers = runner.layer_info();
  const int snapshots = runner.state_snapshot_slots();
  const v1::PrefixSharing sharing = layers.linear_layers == 0 ? v1::PREFIX_SHARING_BLOCKS
                                    : snapshots > 0 ? v1::PREFIX_SHARING_STATE_SNAPSHOTS
                                                    : v1::PREFIX_SHARING_NONE;
  if (sharing != v1::PREFIX_SHARING_NONE) d.add_features("prefix_cache");
  // Token masks from a grammar (structured outputs) need the model's vocabulary.
  if (options.grammar_vocabulary != nullptr) d.add_features("structured_outputs");
  d.set_prefix_sharing(sharing);
  d.set_state_snapshot_slots(snapshots);
  d.set_attention_layers(layers.attention_layers);
  d.set_linear_attention_layers(layers.linear_layers);
  d.set_state_bytes_per_sequence(layers.state_bytes_per_sequence);
  d.set_max_logprobs(max_logprobs);
  return d;
}

}  // namespace

WorkerService::WorkerService(ModelRunner* runner, const WorkerServiceOptions& options)
    : metrics_(options.metrics),
      secret_(options.secret),
      executor_(runner, {.max_num_seqs = options.max_num_seqs,
                         .grammar_vocabulary = options.grammar_vocabulary}),
      step_thread_(std::make_unique<StepThread>()) {
  description_ = BuildDescription(*runner, options, executor_.max_logprobs());
}

WorkerService::~WorkerService() = default;

grpc::Status WorkerService::Describe(grpc::ServerContext* context,
                                     const v1::DescribeRequest* request,
                                     v1::DescribeResponse* response) {
  if (grpc::Status key = util::CheckBearer(context->client_metadata(), secret_, "worker secret");
      !key.ok()) {
    return key;
  }
  *response = description_;
  return grpc::Status::OK;
}

grpc::Status WorkerService::PrepareGrammar(grpc::ServerContext* context,
                                           const v1::Grammar* request,
                                           v1::PrepareGrammarResponse* response) {
  if (grpc::Status key = util::CheckBearer(context->client_metadata(), secret_, "worker secret");
      !key.ok()) {
    return key;
  }
  SlotGrammars* grammars = executor_.grammars();
  if (grammars == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "this worker has no vocabulary to constrain output with");
  }
  const auto start = std::chrono::steady_clock::now();
  if (absl::Status status = grammars->Prepare(*request); !status.ok()) {
    return util::ToGrpcStatus(status);
  }
  response->set_compile_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return grpc::Status::OK;
}

grpc::Status WorkerService::Run(grpc::ServerContext* context,
                                grpc::ServerReaderWriter<v1::StepResult, v1::StepPlan>* stream) {
  if (grpc::Status key = util::CheckBearer(context->client_metadata(), secret_, "worker secret");
      !key.ok()) {
    return key;
  }
  bool expected = false;
  if (!attached_.compare_exchange_strong(expected, true)) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "another router is attached to this worker (one Run stream at a time)");
  }
  // Tells the router the stream is ours before any plan arrives (common/util/worker_handshake.h).
  context->AddInitialMetadata(util::kRunAcceptedMetadata, "1");
  stream->SendInitialMetadata();
  grpc::Status status;
  step_thread_->RunAndWait([&] { status = ServeStream(context, stream); });
  attached_.store(false);
  return status;
}

grpc::Status WorkerService::ServeStream(
    grpc::ServerContext* context, grpc::ServerReaderWriter<v1::StepResult, v1::StepPlan>* stream) {
  executor_.Reset();  // a new stream starts with an empty slot table and step 1
  // Reused every step: parsing into the same messages recycles their storage.
  v1::StepPlan plan;
  v1::StepResult result;
  grpc::Status status = grpc::Status::OK;
  while (stream->Read(&plan)) {
    const StepExecutor::Clock::time_point received = StepExecutor::Clock::now();
    if (absl::Status executed = executor_.Execute(plan, received, &result); !executed.ok()) {
      status = util::ToGrpcStatus(executed);
      break;
    }
    if (!stream->Write(result)) break;  // the router went away
    // After the write, so the router gets its result without waiting for the metrics.
    if (metrics_ != nullptr) {
      metrics_->ObserveStep(executor_.last_step_stats(), result.timings(),
                            StepExecutor::Clock::now());
    }
  }
  executor_.Reset();  // the stream's end drops every slot
  if (status.ok() && context->IsCancelled()) {
    status = grpc::Status(grpc::StatusCode::CANCELLED, "the Run stream was cancelled");
  }
  return status;
}

}  // namespace tessera::worker
