// LocalAI's backend.Backend gRPC service (proto/localai/backend.proto) in front of tessera's
// router engine and a tessera-worker:
//
//   Health          "OK", also before any model is loaded.
//   LoadModel       resolves the model file (std::filesystem::canonical: `/m/./x.gguf`,
//                   `//m/x.gguf` and symlinks name one file, "already loaded" while it serves),
//                   loads the tokenizer and chat template from the GGUF, starts a tessera-worker on
//                   it with a fresh random secret in $TESSERA_WORKER_SECRET (--workers N: N of
//                   them, one secret, behind one EngineGroup as the router's data parallel; or
//                   attaches to --worker with $TESSERA_WORKER_SECRET), starts the engine(s) and
//                   waits until every worker has accepted its engine's own Run stream. Only then
//                   does the new model replace the old one: a failed call (no model named, a
//                   missing file, not a regular file, not GGUF, a worker that does not start)
//                   answers success=false and the old model keeps serving. On success the old
//                   model is retired: its streams end with CANCELLED ("LoadModel replaced the
//                   model with ..."), its workers are terminated and reaped. (An attached --worker serves one engine, so there the
//                   old engine lets go before the new one connects.) ContextSize caps prompt + max
//                   tokens; Threads goes to the worker; NGPULayers > 0 asks for a GPU, which this
//                   build's worker (CPU) does not have: it is reported in the Result message and
//                   the CPU is used.
//   Predict         one completion (Reply: whole text, token counts, timings in ms; with
//                   Logprobs, every token's logprob and alternatives as JSON, reply_logprobs.h).
//   PredictStream   one Reply per engine response: new text in `message`, cumulative `tokens`,
//                   `prompt_tokens` and both timings on every Reply (LocalAI keeps the last);
//                   with Logprobs, each Reply has its own tokens' logprobs, and one last Reply
//                   (no new text) has the whole answer's, which is what LocalAI keeps.
//   TokenizeString  the Prompt's token ids (BOS added as the model asks).
//   Status          READY or BUSY (requests in flight) with memory (process RSS, the live
//                   workers' RSS together under "tessera-worker").
//   Free            retires the model as a reload does (its streams end with CANCELLED, its
//                   worker is reaped before Free answers); a new LoadModel may follow.
//   GetMetrics      the loaded model's token counters and generation speed, from its router
//                   metrics (backend_reports.h); counted from LoadModel.
//   ModelMetadata   whether the loaded model's chat template thinks, and its rendering of a
//                   one-message chat with enable_thinking (backend_reports.h); the request's
//                   ModelOptions are not read (the loaded model is described).
//   (GetMetrics, ModelMetadata, Predict*, TokenizeString: FAILED_PRECONDITION before LoadModel.)
//   anything else   UNIMPLEMENTED (the generated base class).
//
// Requests are admitted by the router's own BuildRequest and submitted to the engine like gRPC
// Generate (router/completion_job.h), so concurrent Predict calls are batched by the scheduler.
// With an auth token, every call needs metadata `authorization: Bearer <token>`
// (UNAUTHENTICATED otherwise).
//
// Threading: gRPC's sync-server threads run the handlers; the loaded model is shared through a
// shared_ptr under a mutex (calls in flight keep what they hold, but a retired model ends their
// work instead of waiting for it); child processes are spawned and reaped on the OwnerThread.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <random>
#include <string>

#include "common/process/child_process.h"
#include "localai/backend.grpc.pb.h"
#include "router/engine.h"
#include "router/request_engine.h"
#include "router/localai/owner_thread.h"
#include "router/model_frontend.h"

namespace tessera::router::localai {

struct BackendOptions {
  std::string auth_token;      // "" = no auth (main reads LOCALAI_GRPC_AUTH_TOKEN)
  std::string worker_address;  // attach to this worker instead of starting one
  std::string worker_secret;   // the attached worker's secret (main reads TESSERA_WORKER_SECRET)
  std::string worker_binary;   // tessera-worker to start
  int kv_cache_mb = 0;         // passed to the worker; 0 = its default
  int max_num_seqs = 0;        // engine and worker; 0 = defaults
  // Workers started per loaded model (data parallel: one engine each, routed as the router's
  // EngineGroup). LoadModel's ModelOptions has no field for it, so it is this process's flag.
  int workers = 1;
  double load_timeout_s = 180;
};

class BackendService final : public ::backend::Backend::Service {
 public:
  BackendService(BackendOptions options, OwnerThread* owner);
  ~BackendService() override;

  grpc::Status Health(grpc::ServerContext* context, const ::backend::HealthMessage* request,
                      ::backend::Reply* reply) override;
  grpc::Status LoadModel(grpc::ServerContext* context, const ::backend::ModelOptions* request,
                         ::backend::Result* result) override;
  grpc::Status Predict(grpc::ServerContext* context, const ::backend::PredictOptions* request,
                       ::backend::Reply* reply) override;
  grpc::Status PredictStream(grpc::ServerContext* context, const ::backend::PredictOptions* request,
                             grpc::ServerWriter<::backend::Reply>* writer) override;
  grpc::Status TokenizeString(grpc::ServerContext* context,
                              const ::backend::PredictOptions* request,
                              ::backend::TokenizationResponse* response) override;
  grpc::Status Status(grpc::ServerContext* context, const ::backend::HealthMessage* request,
                      ::backend::StatusResponse* response) override;
  grpc::Status Free(grpc::ServerContext* context, const ::backend::HealthMessage* request,
                    ::backend::Result* result) override;
  grpc::Status GetMetrics(grpc::ServerContext* context, const ::backend::MetricsRequest* request,
                          ::backend::MetricsResponse* response) override;
  grpc::Status ModelMetadata(grpc::ServerContext* context, const ::backend::ModelOptions* request,
                             ::backend::ModelMetadataResponse* response) override;

  // Retires the model: stops the engine and the worker (also done by the destructor).
  void Unload();

 private:
  struct Loaded;
  grpc::Status CheckAuth(const grpc::ServerContext& context) const;
  std::shared_ptr<Loaded> loaded() const;
  // The caller is authorized and a model is loaded (into *out); else the status to answer
  // (UNAUTHENTICATED, or FAILED_PRECONDITION "no model is loaded").
  grpc::Status AuthorizedWithModel(const grpc::ServerContext& context,
                                   std::shared_ptr<Loaded>* out) const;
  // Makes `next` (may be null) the model and retires the old one with `why`.
  void Replace(std::shared_ptr<Loaded> next, const std::string& why);
  // The model's frontend (tokenizer, chat template) from the canonical `file`; nothing started.
  absl::StatusOr<std::shared_ptr<Loaded>> Prepare(const ::backend::ModelOptions& request,
                                                  const std::string& file, std::string* note);
  // Starts (or attaches to) the worker(s) and the engine(s); OK once every worker accepted its
  // engine.
  absl::Status Start(const ::backend::ModelOptions& request, Loaded* loaded);
  // Waits until every engine serves; fails when a started worker ended or the time is up.
  absl::Status AwaitServing(Loaded* loaded, const std::string& workers);
  // Spawns one more tessera-worker on the owner thread; its address once it listens.
  absl::StatusOr<std::string> SpawnWorker(const ::backend::ModelOptions& request,
                                          const std::string& secret, Loaded* loaded);
  // `request` admitted against `loaded`'s model and worker, as gRPC Generate admits one.
  absl::StatusOr<ValidatedRequest> Admit(const ::backend::PredictOptions& request,
                                         const Loaded& loaded);
  // Admits `request` and streams its Replies to `on_reply` (false = the client is gone); *total
  // is the whole answer as one Reply.
  grpc::Status Run(grpc::ServerContext* context, const ::backend::PredictOptions& request,
                   const std::function<bool(const ::backend::Reply&)>& on_reply,
                   ::backend::Reply* total);

  const BackendOptions options_;
  OwnerThread* owner_;
  mutable std::mutex mutex_;
  std::shared_ptr<Loaded> loaded_;  // guarded by mutex_; null until LoadModel
  std::mutex load_mutex_;           // one LoadModel/Free at a time
  std::mutex seed_mutex_;
  std::mt19937_64 seed_source_;  // guarded by seed_mutex_
};

}  // namespace tessera::router::localai
