#include "router/localai/backend_service.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <optional>
#include <regex>
#include <span>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/process/worker_secret.h"
#include "common/util/bearer_token.h"
#include "common/util/grpc_status.h"
#include "router/completion_job.h"
#include "router/engine_group.h"
#include "router/localai/backend_reports.h"
#include "router/localai/predict_request.h"
#include "router/localai/reply_builder.h"
#include "router/request_builder.h"

namespace tessera::router::localai {
namespace {

namespace v1 = ::tessera::v1;
using Clock = std::chrono::steady_clock;

// Resident memory of `pid` ("self" for this process) in bytes; 0 when unreadable.
uint64_t ResidentBytes(const std::string& pid) {
  std::ifstream statm("/proc/" + pid + "/statm");
  uint64_t pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

// One loaded model: its frontend, its engine (an EngineGroup with several workers) and the
// workers it drives.
struct BackendService::Loaded {
  OwnerThread* owner = nullptr;
  std::string model_file;  // canonical (std::filesystem::canonical)
  int context_size = 0;    // 0 = the model's
  std::unique_ptr<ModelFrontend> frontend;
  // The engines' router metrics (one per worker, labelled worker="i" with several), read by
  // GetMetrics; declared before `engine`, which uses them until it is destroyed.
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::vector<std::unique_ptr<RouterMetrics>> metrics;
  std::unique_ptr<RequestEngine> engine;
  std::vector<std::unique_ptr<process::ChildProcess>> workers;  // owner thread only; none attached
  std::atomic<bool> workers_live{false};  // Status may read worker_pids; false once retired
  std::vector<pid_t> worker_pids;         // set before the model is published, then constant

  // Ends this model's service now, whoever still holds it: streams in Run see `why` and end,
  // the engine stops, the worker is terminated and reaped. Idempotent (the first reason stays).
  void Retire(const std::string& why) {
    std::lock_guard<std::mutex> lock(retire_mutex);
    {
      std::lock_guard<std::mutex> reason_lock(reason_mutex);
      if (!retired_reason.has_value()) retired_reason = why;
    }
    if (engine != nullptr) engine->Stop();  // fails what is still in flight
    workers_live.store(false);
    if (workers.empty()) return;
    owner->Run([this] {
      for (auto& worker : workers) (void)worker->Signal(SIGTERM);
      for (auto& worker : workers) (void)worker->Wait(absl::Seconds(10));
      workers.clear();  // SIGKILLs those still there, and reaps them
    });
  }

  // Why Retire was called; nullopt while this model serves.
  std::optional<std::string> retired() const {
    std::lock_guard<std::mutex> lock(reason_mutex);
    return retired_reason;
  }

  ~Loaded() { Retire("the model was unloaded"); }

 private:
  std::mutex retire_mutex;  // one Retire at a time (LoadModel/Free vs the last holder)
  mutable std::mutex reason_mutex;
  std::optional<std::string> retired_reason;  // guarded by reason_mutex
};

BackendService::BackendService(BackendOptions options, OwnerThread* owner)
    : options_(std::move(options)), owner_(owner), seed_source_(std::random_device{}()) {}

BackendService::~BackendService() { Unload(); }

void BackendService::Unload() { Replace(nullptr, "the backend is shutting down"); }

void BackendService::Replace(std::shared_ptr<Loaded> next, const std::string& why) {
  std::shared_ptr<Loaded> old;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    old = std::exchange(loaded_, std::move(next));
  }
  // Streams still hold `old`; retiring it ends them instead of waiting for them to finish.
  if (old != nullptr) old->Retire(why);
}

std::shared_ptr<BackendService::Loaded> BackendService::loaded() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return loaded_;
}

grpc::Status BackendService::CheckAuth(const grpc::ServerContext& context) const {
  return util::CheckBearer(context.client_metadata(), options_.auth_token,
                           "LOCALAI_GRPC_AUTH_TOKEN");
}

grpc::Status BackendService::Health(grpc::ServerContext* context, const ::backend::HealthMessage*,
                                    ::backend::Reply* reply) {
  if (grpc::Status auth = CheckAuth(*context); !auth.ok()) return auth;
  reply->set_message("OK");
  return grpc::Status::OK;
}

absl::StatusOr<std::shared_ptr<BackendService::Loaded>> BackendService::Prepare(
    const ::backend::ModelOptions& request, const std::string& file, std::string* note) {
  auto loaded = std::make_shared<Loaded>();
  loaded->owner = owner_;
  loaded->model_file = file;
  loaded->context_size = std::max(0, request.contextsize());
  absl::StatusOr<std::unique_ptr<ModelFrontend>> frontend = LoadModelFrontend(file);
  if (!frontend.ok()) return frontend.status();
  loaded->frontend = *std::move(frontend);
  if (request.ngpulayers() > 0) {
    *note = "NGPULayers > 0, but this tessera-worker runs on the CPU; using the CPU. ";
  }
  return loaded;
}

absl::StatusOr<std::string> BackendService::SpawnWorker(const ::backend::ModelOptions& request,
                                                        const std::string& secret,
                                                        Loaded* loaded) {
  std::vector<std::string> args = {"--model", loaded->model_file, "--listen", "127.0.0.1:0"};
  if (request.threads() > 0) {
    args.insert(args.end(), {"--threads", absl::StrCat(request.threads())});
  }
  if (options_.kv_cache_mb > 0) {
    args.insert(args.end(), {"--kv-cache-mb", absl::StrCat(options_.kv_cache_mb)});
  }
  if (options_.max_num_seqs > 0) {
    args.insert(args.end(), {"--max-num-seqs", absl::StrCat(options_.max_num_seqs)});
  }
  absl::StatusOr<std::string> address = absl::UnavailableError("the worker was not started");
  owner_->Run([&] {
    absl::StatusOr<std::unique_ptr<process::ChildProcess>> child = process::ChildProcess::Spawn(
        {.path = options_.worker_binary, .args = args, .echo_stderr_fd = STDERR_FILENO,
         .env = {process::WorkerSecretEnvEntry(secret)}});
    if (!child.ok()) {
      address = child.status();
      return;
    }
    process::ChildProcess& worker = *loaded->workers.emplace_back(*std::move(child));
    loaded->worker_pids.push_back(worker.pid());
    const std::regex listening("tessera-worker listening on (\\S+)");
    for (;;) {
      absl::StatusOr<std::string> line =
          worker.ReadStdoutLine(absl::Seconds(options_.load_timeout_s));
      if (!line.ok()) {
        address = absl::UnavailableError(
            absl::StrCat("tessera-worker did not start: ", line.status().message(), "; ",
                         worker.StderrTail()));
        return;
      }
      std::smatch match;
      if (std::regex_search(*line, match, listening)) {
        address = match[1].str();
        return;
      }
    }
  });
  return address;
}

absl::Status BackendService::Start(const ::backend::ModelOptions& request, Loaded* loaded) {
  std::vector<std::string> addresses = {options_.worker_address};
  std::string secret = options_.worker_secret;
  if (options_.worker_address.empty()) {
    addresses.clear();
    // Fresh per model, one for all its workers, as `tessera serve`.
    secret = process::RandomSecret();
    for (int i = 0; i < options_.workers; ++i) {
      absl::StatusOr<std::string> address = SpawnWorker(request, secret, loaded);
      if (!address.ok()) return address.status();
      addresses.push_back(*address);
    }
  }
  std::vector<std::unique_ptr<Engine>> engines;
  const bool several = addresses.size() > 1;
  for (size_t i = 0; i < addresses.size(); ++i) {
    EngineConfig config{.worker_address = addresses[i], .worker_secret = secret};
    if (options_.max_num_seqs > 0) config.max_num_seqs = options_.max_num_seqs;
    config.publish_prefixes = several;  // read by the group's routing only
    loaded->metrics.push_back(std::make_unique<RouterMetrics>(
        loaded->registry,
        RouterMetricsOptions{.max_num_batched_tokens = config.max_num_batched_tokens,
                             .worker = several ? absl::StrCat(i) : ""}));
    engines.push_back(
        std::make_unique<Engine>(config, loaded->frontend.get(), loaded->metrics.back().get()));
  }
  if (engines.size() == 1) {
    loaded->engine = std::move(engines.front());
  } else {
    loaded->engine = std::make_unique<EngineGroup>(std::move(engines));
  }
  loaded->engine->Start();
  return AwaitServing(loaded, absl::StrJoin(addresses, ", "));
}

absl::Status BackendService::AwaitServing(Loaded* loaded, const std::string& workers) {
  // serving turns true only once a worker accepted its engine's own Run stream.
  const auto all_serving = [loaded] {
    for (const WorkerStatus& worker : loaded->engine->workers()) {
      if (!worker.serving) return false;
    }
    return true;
  };
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options_.load_timeout_s * 1e3));
  for (int turn = 0; !all_serving(); ++turn) {
    if (Clock::now() > deadline) {
      return absl::UnavailableError(absl::StrCat("the worker(s) at ", workers,
                                                 " did not accept a connection within ",
                                                 options_.load_timeout_s, " s"));
    }
    if (turn % 10 == 9) {
      absl::Status alive;
      owner_->Run([&] {
        for (const auto& worker : loaded->workers) {
          if (std::optional<process::ChildExit> exit = worker->Poll(); exit.has_value()) {
            alive = absl::UnavailableError(absl::StrCat(
                "tessera-worker ended (", exit->ToString(), "): ", worker->StderrTail()));
          }
        }
      });
      if (!alive.ok()) return alive;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  loaded->workers_live.store(true);
  return absl::OkStatus();
}

grpc::Status BackendService::LoadModel(grpc::ServerContext* context,
                                       const ::backend::ModelOptions* request,
                                       ::backend::Result* result) {
  if (grpc::Status auth = CheckAuth(*context); !auth.ok()) return auth;
  std::lock_guard<std::mutex> load_lock(load_mutex_);
  // LocalAI reads Result.success and Result.message: failures are OK calls with success=false,
  // and every failure before the swap below leaves the current model serving.
  result->set_success(false);
  absl::StatusOr<std::string> file = CanonicalModelFile(*request);
  if (!file.ok()) {
    result->set_message(std::string(file.status().message()));
    return grpc::Status::OK;
  }
  if (std::shared_ptr<Loaded> current = loaded();
      current != nullptr && current->model_file == *file) {
    result->set_success(true);
    result->set_message(absl::StrCat(*file, " is already loaded"));
    return grpc::Status::OK;
  }
  std::string note;
  absl::StatusOr<std::shared_ptr<Loaded>> next = Prepare(*request, *file, &note);
  if (!next.ok()) {
    result->set_message(std::string(next.status().message()));
    return grpc::Status::OK;
  }
  const std::string why = absl::StrCat("LoadModel replaced the model with ", *file);
  // An attached worker serves one engine: the old one lets go first. A started worker is new,
  // so the old model serves until the new one does (both are in memory for that moment).
  if (!options_.worker_address.empty()) Replace(nullptr, why);
  if (absl::Status started = Start(*request, next->get()); !started.ok()) {
    result->set_message(std::string(started.message()));
    return grpc::Status::OK;  // `next` retires on return: its worker is terminated and reaped
  }
  Replace(*std::move(next), why);
  result->set_success(true);
  result->set_message(absl::StrCat(note, "loaded ", *file));
  return grpc::Status::OK;
}

absl::StatusOr<ValidatedRequest> BackendService::Admit(const ::backend::PredictOptions& request,
                                                       const Loaded& loaded) {
  absl::StatusOr<v1::GenerateRequest> generate = ToGenerateRequest(request);
  if (!generate.ok()) return generate.status();
  std::optional<wv1::DescribeResponse> worker = loaded.engine->worker();
  if (!worker.has_value()) return absl::UnavailableError("the worker is not connected");
  ModelLimits limits = LimitsOfWorker(*worker);
  if (loaded.context_size > 0) {
    limits.max_context = std::min(limits.max_context, loaded.context_size);
  }
  uint64_t seed = 0;
  {
    std::lock_guard<std::mutex> lock(seed_mutex_);
    seed = seed_source_();
  }
  return BuildRequest(*generate, *loaded.frontend, limits, seed);
}

grpc::Status BackendService::Run(grpc::ServerContext* context,
                                 const ::backend::PredictOptions& request,
                                 const std::function<bool(const ::backend::Reply&)>& on_reply,
                                 ::backend::Reply* total) {
  std::shared_ptr<Loaded> loaded = this->loaded();
  if (loaded == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "no model is loaded: LoadModel first");
  }
  absl::StatusOr<ValidatedRequest> admitted = Admit(request, *loaded);
  if (!admitted.ok()) return util::ToGrpcStatus(admitted.status());
  const tokenizer::Tokenizer& tokenizer = *loaded->frontend->tokenizer;
  ReplyBuilder replies(static_cast<int>(admitted->prompt_tokens.size()),
                       admitted->sampling.logprobs(), [&tokenizer](int32_t id) {
                         absl::StatusOr<std::string> text =
                             tokenizer.Decode(std::span<const int32_t>(&id, 1), {});
                         return text.ok() ? *text : std::string();
                       });
  std::vector<ValidatedRequest> requests;
  requests.push_back(*std::move(admitted));
  std::shared_ptr<CompletionJob> job =
      CompletionJob::Submit(loaded->engine.get(), std::move(requests));
  const auto cancelled = [&](const std::string& why) {
    job->Cancel();
    return grpc::Status(grpc::StatusCode::CANCELLED, why);
  };
  while (!job->Finished()) {
    if (std::optional<std::string> why = loaded->retired(); why.has_value()) {
      return cancelled(absl::StrCat("cancelled: ", *why));
    }
    if (context->IsCancelled()) return cancelled("the client went away");
    std::optional<JobEvent> event = job->Next(absl::Milliseconds(100));
    if (!event.has_value()) continue;
    if (event->closed && !event->status.ok()) {
      if (std::optional<std::string> why = loaded->retired(); why.has_value()) {
        return grpc::Status(grpc::StatusCode::CANCELLED, absl::StrCat("cancelled: ", *why));
      }
      return util::ToGrpcStatus(event->status);
    }
    if (!on_reply(replies.Next(event->response, event->closed))) {
      return cancelled("the client went away");
    }
  }
  *total = replies.Whole();
  return grpc::Status::OK;
}

grpc::Status BackendService::Predict(grpc::ServerContext* context,
                                     const ::backend::PredictOptions* request,
                                     ::backend::Reply* reply) {
  if (grpc::Status auth = CheckAuth(*context); !auth.ok()) return auth;
  return Run(
      context, *request, [](const ::backend::Reply&) { return true; }, reply);
}

grpc::Status BackendService::PredictStream(grpc::ServerContext* context,
                                           const ::backend::PredictOptions* request,
                                           grpc::ServerWriter<::backend::Reply>* writer) {
  if (grpc::Status auth = CheckAuth(*context); !auth.ok()) return auth;
  ::backend::Reply total;
  grpc::Status status = Run(
      context, *request, [writer](const ::backend::Reply& reply) { return writer->Write(reply); },
      &total);
  if (!status.ok() || total.logprobs().empty()) return status;
  // LocalAI keeps the last Reply's logprobs as the answer's (as its llama.cpp backend's last
  // streamed result carries every token's): one more Reply, no new text, the whole answer's.
  total.clear_message();
  if (!writer->Write(total)) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
  }
  return grpc::Status::OK;
}

grpc::Status BackendService::TokenizeString(grpc::ServerContext* context,
                                            const ::backend::PredictOptions* request,
                                            ::backend::TokenizationResponse* response) {
  if (grpc::Status auth = CheckAuth(*context); !auth.ok()) return auth;
  std::shared_ptr<Loaded> loaded = this->loaded();
  if (loaded == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "no model is loaded: LoadModel first");
  }
  absl::StatusOr<std::vector<int32_t>> ids =
      TokenizeText(request->prompt(), /*add_special=*/true, *loaded->frontend);
  if (!ids.ok()) return util::ToGrpcStatus(ids.status());
  response->set_length(static_cast<int32_t>(ids->size()));
  response->mutable_tokens()->Add(ids->begin(), ids->end());
  return grpc::Status::OK;
}

grpc::Status BackendService::Status(grpc::ServerContext* context, const ::backend::HealthMessage*,
                                    ::backend::StatusResponse* response) {
  if (grpc::Status auth = CheckAuth(*context); !auth.ok()) return auth;
  std::shared_ptr<Loaded> loaded = this->loaded();
  ::backend::MemoryUsageData* memory = response->mutable_memory();
  const uint64_t own = ResidentBytes("self");
  (*memory->mutable_breakdown())["tessera-localai"] = own;
  uint64_t total = own;
  if (loaded == nullptr) {
    response->set_state(::backend::StatusResponse::UNINITIALIZED);
  } else {
    const EngineStats stats = loaded->engine->stats();
    response->set_state(stats.requests_running + stats.requests_waiting > 0
                            ? ::backend::StatusResponse::BUSY
                            : ::backend::StatusResponse::READY);
    // Every worker of the model together (a LocalAI breakdown names a component).
    uint64_t workers = 0;
    if (loaded->workers_live.load()) {
      for (const pid_t pid : loaded->worker_pids) workers += ResidentBytes(absl::StrCat(pid));
    }
    if (workers > 0) {
      (*memory->mutable_breakdown())["tessera-worker"] = workers;
      total += workers;
    }
  }
  memory->set_total(total);
  return grpc::Status::OK;
}

grpc::Status BackendService::Free(grpc::ServerContext* context, const ::backend::HealthMessage*,
                                  ::backend::Result* result) {
  if (grpc::Status auth = CheckAuth(*context); !auth.ok()) return auth;
  std::lock_guard<std::mutex> load_lock(load_mutex_);
  const bool had_model = loaded() != nullptr;
  Replace(nullptr, "Free unloaded the model");  // ends its streams and reaps its worker
  result->set_success(true);
  result->set_message(had_model ? "unloaded" : "no model was loaded");
  return grpc::Status::OK;
}

grpc::Status BackendService::GetMetrics(grpc::ServerContext* context,
                                        const ::backend::MetricsRequest*,
                                        ::backend::MetricsResponse* response) {
  std::shared_ptr<Loaded> loaded;
  if (grpc::Status ok = AuthorizedWithModel(*context, &loaded); !ok.ok()) return ok;
  *response = MetricsOf(*loaded->registry);
  return grpc::Status::OK;
}

grpc::Status BackendService::ModelMetadata(grpc::ServerContext* context,
                                           const ::backend::ModelOptions*,
                                           ::backend::ModelMetadataResponse* response) {
  std::shared_ptr<Loaded> loaded;
  if (grpc::Status ok = AuthorizedWithModel(*context, &loaded); !ok.ok()) return ok;
  *response = ModelMetadataOf(*loaded->frontend);
  return grpc::Status::OK;
}

grpc::Status BackendService::AuthorizedWithModel(const grpc::ServerContext& context,
                                                 std::shared_ptr<Loaded>* out) const {
  if (grpc::Status auth = CheckAuth(context); !auth.ok()) return auth;
  *out = loaded();
  if (*out == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "no model is loaded: LoadModel first");
  }
  return grpc::Status::OK;
}

}  // namespace tessera::router::localai
