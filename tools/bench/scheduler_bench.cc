// Planning cost of the router's scheduler (router/scheduler.h), the engine thread's per-step
// work besides protobuf and gRPC: one Schedule() plus the OnTokenSampled() calls of one result,
// driven like the engine drives it (plan N goes out, then result N-1 is delivered).
//
//   BM_DecodeStep/N: N running requests, all decoding (the steady state the ≤ 20 µs per step
//                    target is about). When all of them reach max_tokens, a new batch is added
//                    and prefilled with the timer paused.
//   BM_ChurnStep/N:  N slots kept busy by requests of random length (16..512 tokens); each
//                    finished request is replaced at once, so steps mix admissions, chunked
//                    prefills and decodes, and AddRequest is on the timed path.
// allocs_per_step counts heap allocations on the timed path (operator new is counted below).
// Numbers are only meaningful from a Release build.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "router/scheduler.h"

namespace {
std::atomic<int64_t> g_num_allocs{0};
}  // namespace

// GCC cannot see that these two replace the global pair together.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t size) {
  g_num_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace tessera::router {
namespace {

constexpr int32_t kPromptTokens = 32;

std::unique_ptr<Scheduler> MakeScheduler(int32_t num_seqs, int32_t max_tokens) {
  SchedulerConfig c;
  // Room for every prompt in one step, so BM_DecodeStep's prefill is one (untimed) step.
  c.max_num_batched_tokens = std::max(8192, num_seqs * kPromptTokens);
  c.max_num_seqs = num_seqs;
  c.block_size = 16;
  c.max_context = kPromptTokens + max_tokens;
  c.num_blocks = num_seqs * BlockManager::BlocksFor(c.max_context, c.block_size) + 1;
  c.max_waiting = 4 * num_seqs;
  return std::move(*Scheduler::Create(c));
}

// Delivers a step's sampled tokens; returns how many requests finished by length.
int Deliver(Scheduler& s, const ScheduledStep& step) {
  int finished = 0;
  for (const ScheduledRequest& r : step.requests) {
    if (!r.samples) continue;
    const absl::StatusOr<SampleOutcome> outcome = s.OnTokenSampled(r.request_id, 42);
    finished += *outcome == SampleOutcome::kFinishedLength ? 1 : 0;
  }
  return finished;
}

void BM_DecodeStep(benchmark::State& state) {
  const auto num_seqs = static_cast<int32_t>(state.range(0));
  constexpr int32_t kMaxTokens = 2048;
  std::unique_ptr<Scheduler> s = MakeScheduler(num_seqs, kMaxTokens);
  const std::vector<int32_t> prompt(kPromptTokens, 5);
  ScheduledStep steps[2];
  RequestId next_id = 1;
  int64_t plans = 0;
  int64_t tokens = 0;
  // Adds a batch and sends its prefill plan (untimed), so timed steps are pure decodes.
  auto refill = [&] {
    for (int32_t i = 0; i < num_seqs; ++i) (void)s->AddRequest(next_id++, prompt, kMaxTokens);
    s->Schedule(&steps[plans++ & 1]);
  };
  refill();
  int64_t untimed_allocs = 0;
  const int64_t allocs_before = g_num_allocs.load();
  for (auto _ : state) {
    ScheduledStep& plan = steps[plans & 1];
    s->Schedule(&plan);                   // plan N
    Deliver(*s, steps[(plans + 1) & 1]);  // result N-1
    ++plans;
    tokens += plan.num_batched_tokens;
    if (plan.empty()) {  // everyone awaited their last token, now delivered: start over
      state.PauseTiming();
      const int64_t before = g_num_allocs.load();
      refill();
      untimed_allocs += g_num_allocs.load() - before;
      state.ResumeTiming();
    }
  }
  state.counters["allocs_per_step"] = benchmark::Counter(
      static_cast<double>(g_num_allocs.load() - allocs_before - untimed_allocs) /
      static_cast<double>(state.iterations()));
  state.counters["running"] = num_seqs;
  state.counters["tokens_per_step"] =
      benchmark::Counter(static_cast<double>(tokens) / static_cast<double>(state.iterations()));
  state.SetItemsProcessed(tokens);
}
BENCHMARK(BM_DecodeStep)->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);

void BM_ChurnStep(benchmark::State& state) {
  const auto num_seqs = static_cast<int32_t>(state.range(0));
  constexpr int32_t kMaxTokens = 512;
  std::unique_ptr<Scheduler> s = MakeScheduler(num_seqs, kMaxTokens);
  const std::vector<int32_t> prompt(kPromptTokens, 5);
  std::mt19937 rng(1);
  RequestId next_id = 1;
  auto add = [&] {
    (void)s->AddRequest(next_id++, prompt, 16 + static_cast<int32_t>(rng() % (kMaxTokens - 15)));
  };
  for (int32_t i = 0; i < num_seqs; ++i) add();
  ScheduledStep steps[2];
  int64_t plans = 0;
  int64_t tokens = 0;
  const int64_t allocs_before = g_num_allocs.load();
  for (auto _ : state) {
    ScheduledStep& plan = steps[plans & 1];
    s->Schedule(&plan);
    const int finished = Deliver(*s, steps[(plans + 1) & 1]);
    for (int i = 0; i < finished; ++i) add();
    ++plans;
    tokens += plan.num_batched_tokens;
  }
  state.counters["allocs_per_step"] = benchmark::Counter(
      static_cast<double>(g_num_allocs.load() - allocs_before) /
      static_cast<double>(state.iterations()));
  state.counters["tokens_per_step"] =
      benchmark::Counter(static_cast<double>(tokens) / static_cast<double>(state.iterations()));
  state.SetItemsProcessed(tokens);
}
BENCHMARK(BM_ChurnStep)->Arg(256)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tessera::router
