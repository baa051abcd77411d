// tessera-step-protocol-bench: the step protocol's own overhead, with no model compute.
//
// A WorkerService runs in this process behind a real gRPC server on 127.0.0.1 (port 0); a client
// stream drives it the way tessera-router does, with 256 slots decoding: every step each slot
// computes one token (no token ids sent), ~16 slots append a block, and about one request
// finishes and is replaced (drop + admission of a 16-token prompt). The model runner is a stub
// that samples zero logits over a 64-token vocabulary on the host (SlotSamplers, as the cpu
// runner does), so what is measured is plan building and serialization, the loopback transport,
// plan parsing and validation, batch building, sampling 256 rows and the result's way back.
//
//   BM_PipelinedRoundTrip: plan N+1 is sent before result N is read (the router's one step in
//                          flight); time per iteration = one plan -> result round trip.
//   BM_LockstepRoundTrip:  send plan, wait for its result (no overlap), for comparison.
//   BM_ExecutorOnly:       StepExecutor::Execute on the same plans, no gRPC; allocs_per_step
//                          counts heap allocations inside Execute (after warm-up only the
//                          admission allocates: 2 for the new request's sampler state; decode
//                          work allocates nothing).
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "worker/sampler/slot_samplers.h"
#include "worker/step_executor.h"
#include "worker/worker_service.h"

// Counts heap allocations, so BM_ExecutorOnly can report how many a step makes.
std::atomic<int64_t> g_allocations{0};

void* operator new(size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace tessera::worker {
namespace {

constexpr int kSlots = 256;
constexpr int kBlockSize = 16;
constexpr int kBlocksPerSlot = 20;  // a request lives < kBlocksPerSlot * kBlockSize tokens
constexpr int kPromptTokens = 16;
constexpr int kLifetime = 256;      // tokens generated per request once staggered
constexpr int kVocab = 64;

// A ModelRunner that computes nothing: zero logits for the rows that sample, sampled on the host
// with each slot's sampler.
class StubRunner final : public ModelRunner {
 public:
  StubRunner() : samplers_(kSlots, kVocab) {
    config_.architecture = "stub";
    config_.name = "stub";
    config_.vocab_size = kVocab;
    config_.context_length = 4096;
  }
  const model::ModelConfig& config() const override { return config_; }
  KvPoolInfo kv_pool() const override {
    return {.block_size = kBlockSize, .num_blocks = 1 + kSlots * kBlocksPerSlot, .bytes = 0};
  }
  std::string backend_name() const override { return "stub"; }
  int max_num_seqs() const override { return kSlots; }
  worker::ModelLayerInfo layer_info() const override { return {.attention_layers = 1, .linear_layers = 0, .state_bytes_per_sequence = 0}; }
  void BeginSequence(int slot, const sampling::SamplingParams& params,
                     std::span<const int32_t> prompt, std::span<const int32_t> generated) override {
    samplers_.Begin(slot, params, prompt, generated);
  }
  void EndSequence(int slot) override { samplers_.End(slot); }
  absl::Status Step(std::span<const SequenceWork> batch, StepSamples* samples,
                    const FillPendingMasks& fill_pending_masks = {}) override {
    if (absl::Status status = samplers_.CheckRows(batch); !status.ok()) return status;
    (void)Forward(batch, &logits_);
    if (AnyMaskPending(batch)) fill_pending_masks();
    samplers_.SampleRows(batch, logits_, samples);
    samples->info = StepRunInfo{};
    return absl::OkStatus();
  }
  absl::Status Forward(std::span<const SequenceWork> batch, StepLogits* logits) override {
    logits->vocab_size = kVocab;
    logits->sequence_index.clear();
    for (size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].needs_logits) logits->sequence_index.push_back(static_cast<int32_t>(i));
    }
    logits->values.assign(logits->sequence_index.size() * kVocab, 0.0f);
    return absl::OkStatus();
  }

 private:
  model::ModelConfig config_;
  SlotSamplers samplers_;
  StepLogits logits_;  // reused every step
};

// Builds the plans of 256 decoding slots. Slot s owns blocks [1 + s * kBlocksPerSlot, ...) and
// reuses them for each request it serves; first lifetimes are staggered so that finishes (and
// block appends) spread evenly over steps.
class DecodePlans {
 public:
  DecodePlans() : slots_(kSlots) {
    for (int s = 0; s < kSlots; ++s) slots_[s].lifetime = 1 + s % kLifetime;
    sampling_.set_temperature(0.0f);
    sampling_.set_top_p(1.0f);
    sampling_.set_repetition_penalty(1.0f);
  }

  // The next plan, into `plan` (its storage reused).
  void Next(v1::StepPlan* plan) {
    plan->Clear();
    plan->set_step(++step_);
    for (int s = 0; s < kSlots; ++s) {
      Slot& slot = slots_[s];
      if (slot.generated == slot.lifetime) {  // finished: drop, admit the next request
        plan->add_drop_slots(s);
        slot = Slot{.lifetime = kLifetime};
      }
      if (slot.known == 0) Admit(s, plan);
      v1::SequenceStep* seq = plan->add_sequences();
      seq->set_slot(s);
      const int n = slot.known - slot.computed;
      seq->set_num_tokens(n);
      while (slot.num_blocks * kBlockSize < slot.computed + n) {
        seq->add_new_blocks(1 + s * kBlocksPerSlot + slot.num_blocks++);
      }
      slot.computed += n;
      ++slot.known;  // it samples
      ++slot.generated;
    }
  }

 private:
  struct Slot {
    int lifetime = 0;
    int known = 0;
    int computed = 0;
    int generated = 0;
    int num_blocks = 0;
  };

  void Admit(int s, v1::StepPlan* plan) {
    v1::NewSequence* seq = plan->add_new_sequences();
    seq->set_slot(s);
    *seq->mutable_sampling() = sampling_;
    for (int t = 0; t < kPromptTokens; ++t) seq->add_tokens((s + t) % kVocab);
    seq->set_num_prompt_tokens(kPromptTokens);
    slots_[s].known = kPromptTokens;
  }

  uint64_t step_ = 0;
  std::vector<Slot> slots_;
  v1::SamplingParams sampling_;
};

// A Worker server on 127.0.0.1:0 and a Run stream to it.
struct Loopback {
  Loopback() : service(&runner, {.max_num_seqs = kSlots, .model_name = "stub",
                                 .eos_token_ids = {}, .bos_token_id = -1,
                                 .device = "bench"}) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    stub = v1::Worker::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                                   grpc::InsecureChannelCredentials()));
    stream = stub->Run(&context);
  }
  ~Loopback() {
    stream->WritesDone();
    v1::StepResult result;
    while (stream->Read(&result)) {
    }
    stream->Finish();
    server->Shutdown();
  }

  StubRunner runner;
  WorkerService service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::Worker::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::StepPlan, v1::StepResult>> stream;
};

void CheckResult(benchmark::State& state, const v1::StepResult& result) {
  if (result.sampled_size() != kSlots) state.SkipWithError("a result lacks samples");
}

void BM_PipelinedRoundTrip(benchmark::State& state) {
  Loopback loop;
  DecodePlans plans;
  v1::StepPlan plan;
  v1::StepResult result;
  plans.Next(&plan);
  loop.stream->Write(plan);  // one plan in flight before the loop
  for (auto _ : state) {
    plans.Next(&plan);
    if (!loop.stream->Write(plan) || !loop.stream->Read(&result)) {
      state.SkipWithError("stream broke");
      break;
    }
    CheckResult(state, result);
  }
  loop.stream->Read(&result);  // the last one in flight
  state.counters["host_us"] = benchmark::Counter(result.timings().host_seconds() * 1e6);
  state.counters["total_us"] = benchmark::Counter(result.timings().total_seconds() * 1e6);
}
BENCHMARK(BM_PipelinedRoundTrip)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_LockstepRoundTrip(benchmark::State& state) {
  Loopback loop;
  DecodePlans plans;
  v1::StepPlan plan;
  v1::StepResult result;
  for (auto _ : state) {
    plans.Next(&plan);
    if (!loop.stream->Write(plan) || !loop.stream->Read(&result)) {
      state.SkipWithError("stream broke");
      break;
    }
    CheckResult(state, result);
  }
}
BENCHMARK(BM_LockstepRoundTrip)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_ExecutorOnly(benchmark::State& state) {
  StubRunner runner;
  StepExecutor executor(&runner, {.max_num_seqs = kSlots});
  DecodePlans plans;
  v1::StepPlan plan;
  v1::StepResult result;
  for (int warm = 0; warm < 2 * kLifetime; ++warm) {  // every slot has served a request
    plans.Next(&plan);
    (void)executor.Execute(plan, StepExecutor::Clock::now(), &result);
  }
  int64_t allocations = 0;
  for (auto _ : state) {
    state.PauseTiming();
    plans.Next(&plan);
    const int64_t before = g_allocations.load();
    state.ResumeTiming();
    if (!executor.Execute(plan, StepExecutor::Clock::now(), &result).ok()) {
      state.SkipWithError("plan rejected");
      break;
    }
    allocations += g_allocations.load() - before;
    CheckResult(state, result);
  }
  state.counters["allocs_per_step"] =
      benchmark::Counter(static_cast<double>(allocations), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_ExecutorOnly)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tessera::worker

BENCHMARK_MAIN();
