#include "router/worker_client.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "common/util/check.h"
#include "common/util/grpc_status.h"
#include "common/util/worker_handshake.h"

namespace tessera::router {

struct WorkerClient::Stream {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<wv1::StepPlan, wv1::StepResult>> rw;
};

namespace {

std::shared_ptr<grpc::Channel> DialWorker(const std::string& address) {
  grpc::ChannelArguments args;
  // Plans with many new long prompts can exceed gRPC's 4 MiB default.
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // Notice a worker that vanished without closing its socket (a killed VM, a cut network).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // A fresh channel per attempt: our own backoff decides when to retry, not the channel's.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

}  // namespace

WorkerClient::WorkerClient(WorkerClientConfig config, WorkerClientCallbacks callbacks)
    : config_(std::move(config)), callbacks_(std::move(callbacks)) {}

absl::Status WorkerClient::PrepareGrammar(const wv1::Grammar& grammar,
                                          std::chrono::milliseconds timeout) {
  std::shared_ptr<grpc::Channel> channel;
  {
    std::lock_guard<std::mutex> lock(prepare_mutex_);
    if (prepare_channel_ == nullptr) prepare_channel_ = DialWorker(config_.address);
    channel = prepare_channel_;
  }
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  if (!config_.secret.empty()) context.AddMetadata("authorization", "Bearer " + config_.secret);
  wv1::PrepareGrammarResponse response;
  const grpc::Status status = wv1::Worker::NewStub(channel)->PrepareGrammar(&context, grammar,
                                                                            &response);
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

WorkerClient::~WorkerClient() { Stop(); }

void WorkerClient::Start() {
  TESSERA_CHECK(!thread_.joinable(), "WorkerClient::Start called twice");
  thread_ = std::thread([this] { ConnectionLoop(); });
}

void WorkerClient::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    if (stream_ != nullptr) stream_->context.TryCancel();
    if (pending_ != nullptr) pending_->context.TryCancel();
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool WorkerClient::Send(uint64_t epoch, const wv1::StepPlan& plan) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stream_ == nullptr || epoch != epoch_) return false;
  return stream_->rw->Write(plan);
}

void WorkerClient::Abandon(uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stream_ != nullptr && epoch == epoch_) stream_->context.TryCancel();
}

void WorkerClient::ConnectionLoop() {
  std::chrono::milliseconds backoff = config_.initial_backoff;
  while (!stopping_) {
    wv1::DescribeResponse description;
    std::unique_ptr<Stream> stream = Connect(&description);
    if (stream == nullptr) {
      SleepBackoff(backoff);
      backoff = std::min(backoff * 2, config_.max_backoff);
      continue;
    }
    backoff = config_.initial_backoff;
    uint64_t epoch = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) stream->context.TryCancel();
      epoch = ++epoch_;
      stream_ = stream.get();
    }
    callbacks_.on_connected(epoch, std::move(description));
    ReadUntilBroken(*stream, epoch);
  }
}

std::unique_ptr<WorkerClient::Stream> WorkerClient::Connect(wv1::DescribeResponse* description) {
  std::shared_ptr<grpc::Channel> channel = DialWorker(config_.address);
  std::unique_ptr<wv1::Worker::Stub> stub = wv1::Worker::NewStub(channel);
  grpc::ClientContext describe_context;
  describe_context.set_deadline(std::chrono::system_clock::now() + config_.describe_timeout);
  const std::string bearer = "Bearer " + config_.secret;
  if (!config_.secret.empty()) describe_context.AddMetadata("authorization", bearer);
  const grpc::Status described =
      stub->Describe(&describe_context, wv1::DescribeRequest(), description);
  if (described.error_code() == grpc::StatusCode::UNAUTHENTICATED && !refused_reported_) {
    refused_reported_ = true;  // once: the client redials every few seconds
    std::fprintf(stderr, "tessera-router: the worker at %s refused us: %s\n",
                 config_.address.c_str(), described.error_message().c_str());
  }
  if (!described.ok()) return nullptr;
  if (stopping_) return nullptr;
  auto stream = std::make_unique<Stream>();
  if (!config_.secret.empty()) stream->context.AddMetadata("authorization", bearer);
  stream->rw = stub->Run(&stream->context);
  if (!WaitUntilAccepted(*stream)) return nullptr;
  return stream;
}

bool WorkerClient::WaitUntilAccepted(Stream& stream) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) stream.context.TryCancel();
    pending_ = &stream;  // Stop cancels it: a silent worker must not hold Stop up
  }
  stream.rw->WaitForInitialMetadata();  // returns early when the call ends (a refusal)
  bool stopping = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_ = nullptr;
    stopping = stopping_;
  }
  const auto& metadata = stream.context.GetServerInitialMetadata();
  if (metadata.find(util::kRunAcceptedMetadata) != metadata.end()) return true;
  const grpc::Status refused = stream.rw->Finish();
  if (!not_accepted_reported_ && !stopping) {
    not_accepted_reported_ = true;  // once: the client redials every few seconds
    std::fprintf(stderr, "tessera-router: the worker at %s did not accept the Run stream: %s\n",
                 config_.address.c_str(), refused.error_message().c_str());
  }
  return false;
}

void WorkerClient::ReadUntilBroken(Stream& stream, uint64_t epoch) {
  wv1::StepResult result;
  while (stream.rw->Read(&result)) {
    callbacks_.on_result(epoch, std::move(result));
    result.Clear();
  }
  {
    // No Write may race with Finish: take the stream away from Send first.
    std::lock_guard<std::mutex> lock(mutex_);
    stream_ = nullptr;
  }
  grpc::Status status = stream.rw->Finish();
  absl::Status lost = util::FromGrpcStatus(status);
  if (lost.ok()) lost = absl::UnavailableError("the worker closed the step stream");
  callbacks_.on_lost(epoch, lost);
}

void WorkerClient::SleepBackoff(std::chrono::milliseconds delay) {
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait_for(lock, delay, [this] { return stopping_.load(); });
}

}  // namespace tessera::router
