#include "router/localai/backend_service.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <regex>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/util/grpc_status.h"
#include "router/completion_job.h"
#include "router/localai/predict_request.h"
#include "router/request_builder.h"

namespace tessera::router::localai {
namespace {

namespace v1 = ::tessera::v1;
using Clock = std::chrono::steady_clock;

double MillisSince(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

// Resident memory of `pid` ("self" for this process) in bytes; 0 when unreadable.
uint64_t ResidentBytes(const std::string& pid) {
  std::ifstream statm("/proc/" + pid + "/statm");
  uint64_t pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

struct BackendService::Loaded {
  OwnerThread* owner = nullptr;
  std::string model_file;
  int context_size = 0;  // 0 = the model's
  std::unique_ptr<ModelFrontend> frontend;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<cli::ChildProcess> worker;  // owner thread only; null when attached

  ~Loaded() {
    if (engine != nullptr) engine->Stop();  // fails what is still in flight
    if (worker == nullptr) return;
    owner->Run([this] {
      (void)worker->Signal(SIGTERM);
      (void)worker->Wait(absl::Seconds(10));
      worker.reset();  // SIGKILLs it if it is still there
    });
  }
};

BackendService::BackendService(BackendOptions options, OwnerThread* owner)
    : options_(std::move(options)), owner_(owner), seed_source_(std::random_device{}()) {}

BackendService::~BackendService() { Unload(); }

void BackendService::Unload() {
  std::shared_ptr<Loaded> old;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    old = std::move(loaded_);
  }
  old.reset();  // the last holder stops the engine and the worker
}

std::shared_ptr<BackendService::Loaded> BackendService::loaded() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return loaded_;
}

grpc::Status BackendService::CheckAuth(const grpc::ServerContext& context) const {
  if (options_.auth_token.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  const std::string expected = absl::StrCat("Bearer ", options_.auth_token);
  if (it == metadata.end() || std::string(it->second.data(), it->second.size()) != expected) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "missing or wrong 'authorization: Bearer <token>' metadata");
  }
  return grpc::Status::OK;
}

grpc::Status BackendService::Health(grpc::ServerContext* context, const ::backend::HealthMessage*,
                                    ::backend::Reply* reply) {
  if (grpc::Status auth = CheckAuth(*context); !auth.ok()) return auth;
  reply->set_message("OK");
  return grpc::Status::OK;
}

absl::StatusOr<std::shared_ptr<BackendService::Loaded>> BackendService::Load(
    const ::backend::ModelOptions& request, std::string* note) {
  absl::StatusOr<std::string> file = ModelFileOf(request);
  if (!file.ok()) return file.status();
  auto loaded = std::make_shared<Loaded>();
  loaded->owner = owner_;
  loaded->model_file = *file;
  loaded->context_size = std::max(0, request.contextsize());
  absl::StatusOr<std::unique_ptr<ModelFrontend>> frontend = LoadModelFrontend(*file);
  if (!frontend.ok()) return frontend.status();
  loaded->frontend = *std::move(frontend);
  if (request.ngpulayers() > 0) {
    *note = "NGPULayers > 0, but this tessera-worker runs on the CPU; using the CPU. ";
  }
  std::string worker_address = options_.worker_address;
  if (worker_address.empty()) {
    std::vector<std::string> args = {"--model", *file, "--listen", "127.0.0.1:0"};
    if (request.threads() > 0)
      args.insert(args.end(), {"--threads", absl::StrCat(request.threads())});
    if (options_.kv_cache_mb > 0) {
      args.insert(args.end(), {"--kv-cache-mb", absl::StrCat(options_.kv_cache_mb)});
    }
    if (options_.max_num_seqs > 0) {
      args.insert(args.end(), {"--max-num-seqs", absl::StrCat(options_.max_num_seqs)});
    }
    absl::Status started;
    owner_->Run([&] {
      absl::StatusOr<std::unique_ptr<cli::ChildProcess>> child = cli::ChildProcess::Spawn(
          {.path = options_.worker_binary, .args = args, .echo_stderr_fd = STDERR_FILENO});
      if (!child.ok()) {
        started = child.status();
        return;
      }
      loaded->worker = *std::move(child);
      const std::regex listening("tessera-worker listening on (\\S+)");
      for (;;) {
        absl::StatusOr<std::string> line =
            loaded->worker->ReadStdoutLine(absl::Seconds(options_.load_timeout_s));
        if (!line.ok()) {
          started = absl::UnavailableError(
              absl::StrCat("tessera-worker did not start: ", line.status().message(), "; ",
                           loaded->worker->StderrTail()));
          return;
        }
        std::smatch match;
        if (std::regex_search(*line, match, listening)) {
          worker_address = match[1].str();
          return;
        }
      }
    });
    if (!started.ok()) return started;
  }
  EngineConfig config{.worker_address = worker_address};
  if (options_.max_num_seqs > 0) config.max_num_seqs = options_.max_num_seqs;
  loaded->engine = std::make_unique<Engine>(config, loaded->frontend.get());
  loaded->engine->Start();
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(options_.load_timeout_s * 1e3));
  while (!loaded->engine->serving()) {
    if (Clock::now() > deadline) {
      return absl::UnavailableError(absl::StrCat("the worker at ", worker_address,
                                                 " did not answer within ", options_.load_timeout_s,
                                                 " s"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return loaded;
}

grpc::Status BackendService::LoadModel(grpc::ServerContext* context,
                                       const ::backend::ModelOptions* request,
                                       ::backend::Result* result) {
  if (grpc::Status auth = CheckAuth(*context); !auth.ok()) return auth;
  std::lock_guard<std::mutex> load_lock(load_mutex_);
  absl::StatusOr<std::string> file = ModelFileOf(*request);
  if (std::shared_ptr<Loaded> current = loaded();
      current != nullptr && file.ok() && current->model_file == *file) {
    result->set_success(true);
    result->set_message(absl::StrCat(*file, " is already loaded"));
    return grpc::Status::OK;
  }
  Unload();
  std::string note;
  absl::StatusOr<std::shared_ptr<Loaded>> loaded = Load(*request, &note);
  result->set_success(loaded.ok());
  if (!loaded.ok()) {
    result->set_message(std::string(loaded.status().message()));
    return grpc::Status::OK;  // LocalAI reads Result.success and Result.message
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    loaded_ = *std::move(loaded);
  }
  result->set_message(absl::StrCat(note, "loaded ", *file));
  return grpc::Status::OK;
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
  absl::StatusOr<v1::GenerateRequest> generate = ToGenerateRequest(request);
  if (!generate.ok()) return util::ToGrpcStatus(generate.status());
  std::optional<wv1::DescribeResponse> worker = loaded->engine->worker();
  if (!worker.has_value()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the worker is not connected");
  }
  ModelLimits limits{.vocab_size = worker->vocab_size(),
                     .max_context = worker->max_context(),
                     .max_logprobs = worker->max_logprobs()};
  if (loaded->context_size > 0)
    limits.max_context = std::min(limits.max_context, loaded->context_size);
  uint64_t seed = 0;
  {
    std::lock_guard<std::mutex> lock(seed_mutex_);
    seed = seed_source_();
  }
  absl::StatusOr<ValidatedRequest> admitted =
      BuildRequest(*generate, *loaded->frontend, limits, seed);
  if (!admitted.ok()) return util::ToGrpcStatus(admitted.status());
  const int prompt_tokens = static_cast<int>(admitted->prompt_tokens.size());
  const Clock::time_point start = Clock::now();
  std::optional<Clock::time_point> first_token;
  std::vector<ValidatedRequest> requests;
  requests.push_back(*std::move(admitted));
  std::shared_ptr<CompletionJob> job =
      CompletionJob::Submit(loaded->engine.get(), std::move(requests));
  int tokens = 0;
  std::string text;
  while (!job->Finished()) {
    if (context->IsCancelled()) {
      job->Cancel();
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
    }
    std::optional<JobEvent> event = job->Next(absl::Milliseconds(100));
    if (!event.has_value()) continue;
    if (event->closed && !event->status.ok()) return util::ToGrpcStatus(event->status);
    tokens += event->response.token_ids_size();
    if (event->closed && event->response.has_usage()) {
      tokens = static_cast<int>(event->response.usage().completion_tokens());
    }
    const Clock::time_point now = Clock::now();
    if (!first_token.has_value() && tokens > 0) first_token = now;
    ::backend::Reply reply;
    reply.set_message(event->response.text());
    reply.set_tokens(tokens);
    reply.set_prompt_tokens(prompt_tokens);
    reply.set_timing_prompt_processing(MillisSince(start, first_token.value_or(now)));
    reply.set_timing_token_generation(first_token.has_value() ? MillisSince(*first_token, now) : 0);
    text += event->response.text();
    *total = reply;
    if (!on_reply(reply)) {
      job->Cancel();
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
    }
  }
  total->set_message(text);
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
  return Run(
      context, *request, [writer](const ::backend::Reply& reply) { return writer->Write(reply); },
      &total);
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
    if (loaded->worker != nullptr) {
      const uint64_t worker = ResidentBytes(absl::StrCat(loaded->worker->pid()));
      (*memory->mutable_breakdown())["tessera-worker"] = worker;
      total += worker;
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
  Unload();
  result->set_success(true);
  result->set_message(had_model ? "unloaded" : "no model was loaded");
  return grpc::Status::OK;
}

}  // namespace tessera::router::localai
