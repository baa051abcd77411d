// The gRPC service `tessera.worker.v1.Worker` (proto/tessera/worker/v1/worker.proto, DESIGN.md
// §2): Describe reports the model and the capacity; Run serves one router's stream of step
// plans, one StepResult per plan, in order.
//
// Run accepts one stream at a time: a second concurrent Run is refused with FAILED_PRECONDITION
// ("another router is attached"); an accepted one gets initial metadata `tessera-run-accepted`
// at once (common/util/worker_handshake.h). Each stream starts with an empty slot table and step 1; an
// invalid plan ends the stream with INVALID_ARGUMENT and its message; any stream end (the router
// half-closes, cancels or disconnects) drops every slot.
//
// Threading: the runner and the StepExecutor are single-threaded, so the service owns one step
// thread that runs a whole stream: Read plan -> Execute -> Write result, strictly in order. The
// gRPC handler thread of Run only hands its stream to the step thread and waits. The router
// pipelines (sends plan N+1 before reading result N); that cannot deadlock here because the
// incoming plan waits in gRPC's receive buffer while we compute and write result N, and a
// blocking Write only waits for the router's flow-control window, which its reader drains.
// (Reading plan N+1 while computing plan N would overlap its parse with compute; a blocked Read
// could then not be interrupted to end the stream with the right status, so we keep it simple.)
// Describe runs on any gRPC thread and reads only immutable data.
//
// Ownership: borrows the runner (it must outlive the service and the server); owns the executor
// and the step thread (joined by the destructor, after the server has shut down).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "tessera/worker/v1/worker.grpc.pb.h"
#include "worker/model_runner.h"
#include "worker/step_executor.h"
#include "worker/weight_storage.h"
#include "worker/worker_metrics.h"

namespace tessera::worker {

struct WorkerServiceOptions {
  int max_num_seqs = 256;              // >= 1
  std::string model_name;              // "" = the model's general.name
  std::vector<int32_t> eos_token_ids;  // from the tokenizer
  int32_t bos_token_id = -1;           // -1 when none
  std::string device;                  // e.g. "cpu: 2 threads, avx512"
  int max_num_batched_tokens = 0;      // tokens per step the runner holds; 0 = no limit
  std::vector<int32_t> graph_buckets;  // device runners' CUDA-graph decode buckets
  uint64_t device_memory_bytes = 0;
  int64_t weights_bytes = 0;
  double weights_load_seconds = 0;
  std::vector<WeightStorage> weight_storage;
  WorkerMetrics* metrics = nullptr;    // borrowed, observed on the step thread; null = none
  // The router⇄worker shared secret: Describe and Run need `authorization: Bearer <secret>`
  // (UNAUTHENTICATED otherwise). "" = no check.
  std::string secret;
  // The model's vocabulary for structured outputs (read during construction); null: none
  // (Describe then leaves out the "structured_outputs" feature).
  const GrammarVocabulary* grammar_vocabulary = nullptr;
};

class StepThread;

class WorkerService final : public tessera::worker::v1::Worker::Service {
 public:
  // Preconditions: runner != nullptr and outlives the service; options.max_num_seqs >= 1.
  WorkerService(ModelRunner* runner, const WorkerServiceOptions& options);
  ~WorkerService() override;  // joins the step thread; shut the server down first

  grpc::Status Describe(grpc::ServerContext* context,
                        const tessera::worker::v1::DescribeRequest* request,
                        tessera::worker::v1::DescribeResponse* response) override;
  grpc::Status Run(grpc::ServerContext* context,
                   grpc::ServerReaderWriter<tessera::worker::v1::StepResult,
                                            tessera::worker::v1::StepPlan>* stream) override;
  // On a gRPC thread, never the step thread (slot_grammars.h: Prepare).
  grpc::Status PrepareGrammar(grpc::ServerContext* context,
                              const tessera::worker::v1::Grammar* request,
                              tessera::worker::v1::PrepareGrammarResponse* response) override;

  // Unique per process start (random).
  const std::string& worker_id() const { return description_.worker_id(); }
  const tessera::worker::v1::DescribeResponse& description() const { return description_; }

 private:
  // The whole life of one Run stream; runs on the step thread.
  grpc::Status ServeStream(grpc::ServerContext* context,
                           grpc::ServerReaderWriter<tessera::worker::v1::StepResult,
                                                    tessera::worker::v1::StepPlan>* stream);

  tessera::worker::v1::DescribeResponse description_;  // immutable after construction
  WorkerMetrics* const metrics_;                       // may be null
  const std::string secret_;                           // "" = no check
  std::atomic<bool> attached_{false};                  // a Run stream is being served
  StepExecutor executor_;                              // step thread only
  std::unique_ptr<StepThread> step_thread_;
};

}  // namespace tessera::worker
