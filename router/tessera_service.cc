#include "router/tessera_service.h"

#include <chrono>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/util/bearer_token.h"
#include "common/util/grpc_status.h"
#include "router/generate_stream.h"

namespace tessera::router {
namespace {

namespace v1 = ::tessera::v1;

grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(util::ToGrpcStatus(status));
  return reactor;
}

absl::StatusOr<ModelLimits> LimitsOf(const RequestEngine& engine) {
  std::optional<wv1::DescribeResponse> worker = engine.worker();
  if (!worker.has_value()) return absl::UnavailableError("no worker has connected yet; retry later");
  return LimitsOfWorker(*worker);
}

// The client's gRPC deadline on the engine's clock; none when the call has no deadline (gRPC
// reports an infinite one as a time point centuries away).
std::optional<std::chrono::steady_clock::time_point> SteadyDeadline(
    std::chrono::system_clock::time_point deadline) {
  const auto left = deadline - std::chrono::system_clock::now();
  if (left > std::chrono::hours(24 * 365)) return std::nullopt;
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(left);
}

// "q4_1 packed: 210 tensors, 0.625 B/parameter; bf16: 1 tensor, 2.000 B/parameter".
std::string WeightStorageSummary(const wv1::DescribeResponse& worker) {
  std::string out;
  for (const wv1::WeightStorage& s : worker.weight_storage()) {
    absl::StrAppend(&out, out.empty() ? "" : "; ", s.format(), s.packed() ? " packed" : "", ": ",
                    s.tensors(), s.tensors() == 1 ? " tensor, " : " tensors, ",
                    absl::StrFormat("%.3f", s.parameters() > 0 ? double(s.bytes()) /
                                                                     double(s.parameters())
                                                               : 0.0),
                    " B/parameter");
  }
  return out;
}

}  // namespace

TesseraService::TesseraService(RequestEngine* engine, const ModelFrontend* model,
                               std::string api_key)
    : engine_(engine), model_(model), api_key_(std::move(api_key)),
      seed_source_(std::random_device{}()) {}

absl::Status TesseraService::CheckKey(const grpc::CallbackServerContext& context) const {
  const grpc::Status status = util::CheckBearer(context.client_metadata(), api_key_, "API key");
  return status.ok() ? absl::OkStatus() : absl::UnauthenticatedError(status.error_message());
}

uint64_t TesseraService::NextSeed() {
  std::lock_guard<std::mutex> lock(seed_mutex_);
  return seed_source_();
}

grpc::ServerWriteReactor<v1::GenerateResponse>* TesseraService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  if (absl::Status key = CheckKey(*context); !key.ok()) return new GenerateStream(engine_, key);
  absl::StatusOr<ModelLimits> limits = LimitsOf(*engine_);
  if (!limits.ok()) return new GenerateStream(engine_, limits.status());
  return new GenerateStream(engine_, BuildRequest(*request, *model_, *limits, NextSeed()),
                            SteadyDeadline(context->deadline()));
}

grpc::ServerUnaryReactor* TesseraService::Tokenize(grpc::CallbackServerContext* context,
                                                   const v1::TokenizeRequest* request,
                                                   v1::TokenizeResponse* response) {
  if (absl::Status key = CheckKey(*context); !key.ok()) return Answer(context, key);
  absl::StatusOr<std::vector<int32_t>> ids;
  if (request->has_chat()) {
    ids = TokenizeChat(request->chat(), *model_);
  } else {
    ids = TokenizeText(request->text(), request->add_special_tokens(), *model_);
  }
  if (ids.ok()) response->mutable_token_ids()->Add(ids->begin(), ids->end());
  return Answer(context, ids.status());
}

grpc::ServerUnaryReactor* TesseraService::Detokenize(grpc::CallbackServerContext* context,
                                                     const v1::DetokenizeRequest* request,
                                                     v1::DetokenizeResponse* response) {
  if (absl::Status key = CheckKey(*context); !key.ok()) return Answer(context, key);
  std::vector<int32_t> ids(request->token_ids().begin(), request->token_ids().end());
  absl::StatusOr<std::string> text =
      model_->tokenizer->Decode(ids, {.skip_special = request->skip_special_tokens()});
  if (!text.ok()) {
    return Answer(context, absl::InvalidArgumentError(
                               absl::StrCat("token_ids: ", text.status().message())));
  }
  response->set_text(std::move(*text));
  return Answer(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* TesseraService::ModelInfo(grpc::CallbackServerContext* context,
                                                    const v1::ModelInfoRequest* request,
                                                    v1::ModelInfoResponse* response) {
  if (absl::Status key = CheckKey(*context); !key.ok()) return Answer(context, key);
  std::optional<wv1::DescribeResponse> worker = engine_->worker();
  if (!worker.has_value()) {
    return Answer(context, absl::UnavailableError("no worker has connected yet; retry later"));
  }
  response->set_model_name(model_->model_name);
  response->set_architecture(worker->architecture());
  response->set_vocab_size(worker->vocab_size());
  response->set_max_context(worker->max_context());
  *response->mutable_eos_token_ids() = worker->eos_token_ids();
  response->set_bos_token_id(worker->bos_token_id());
  if (model_->chat_template.has_value()) {
    response->set_chat_template(model_->chat_template->shape());
  }
  response->set_backend(worker->backend());
  response->set_device(worker->device());
  response->set_block_size(worker->block_size());
  response->set_num_kv_blocks(worker->num_kv_blocks());
  response->set_max_num_seqs(worker->max_num_seqs());
  *response->mutable_graph_buckets() = worker->graph_buckets();
  response->set_device_memory_bytes(worker->device_memory_bytes());
  response->set_weights_bytes(worker->weights_bytes());
  response->set_weight_storage(WeightStorageSummary(*worker));
  for (const WorkerStatus& status : engine_->workers()) {
    v1::WorkerInfo* info = response->add_workers();
    info->set_index(status.index);
    info->set_address(status.address);
    info->set_connected(status.stats.worker_connected);
    if (!status.description.has_value()) continue;
    info->set_backend(status.description->backend());
    info->set_device(status.description->device());
    info->set_num_kv_blocks(status.description->num_kv_blocks());
    info->set_max_num_seqs(status.description->max_num_seqs());
    info->set_device_memory_bytes(status.description->device_memory_bytes());
  }
  return Answer(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* TesseraService::ServerStats(grpc::CallbackServerContext* context,
                                                      const v1::ServerStatsRequest* request,
                                                      v1::ServerStatsResponse* response) {
  if (absl::Status key = CheckKey(*context); !key.ok()) return Answer(context, key);
  const EngineStats stats = engine_->stats();
  response->set_kv_blocks_cached(stats.kv_blocks_cached);
  response->set_requests_running(stats.requests_running);
  response->set_requests_waiting(stats.requests_waiting);
  response->set_kv_blocks_used(stats.kv_blocks_used);
  response->set_kv_blocks_total(stats.kv_blocks_total);
  response->set_worker_connected(stats.worker_connected);
  response->set_worker_active_slots(stats.worker_active_slots);
  response->set_steps(stats.steps);
  response->set_preemptions(stats.preemptions);
  response->set_prefix_cache_query_tokens(stats.prefix_cache_query_tokens);
  response->set_prefix_cache_hit_tokens(stats.prefix_cache_hit_tokens);
  for (const WorkerStatus& status : engine_->workers()) {
    const EngineStats& s = status.stats;
    v1::WorkerStats* worker = response->add_workers();
    worker->set_index(status.index);
    worker->set_address(status.address);
    worker->set_connected(s.worker_connected);
    worker->set_serving(status.serving);
    worker->set_requests_running(s.requests_running);
    worker->set_requests_waiting(s.requests_waiting);
    worker->set_kv_blocks_used(s.kv_blocks_used);
    worker->set_kv_blocks_total(s.kv_blocks_total);
    worker->set_kv_blocks_cached(s.kv_blocks_cached);
    worker->set_worker_active_slots(s.worker_active_slots);
    worker->set_steps(s.steps);
    worker->set_preemptions(s.preemptions);
    worker->set_prefix_cache_query_tokens(s.prefix_cache_query_tokens);
    worker->set_prefix_cache_hit_tokens(s.prefix_cache_hit_tokens);
  }
  return Answer(context, absl::OkStatus());
}

}  // namespace tessera::router
