#include "router/engine.h"

#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/util/check.h"
#include "router/worker_compatibility.h"

namespace tessera::router {
namespace {

namespace v1 = ::tessera::v1;
using Clock = std::chrono::steady_clock;

// Plans sent and not yet answered: plan N+1 goes out while the worker computes plan N.
constexpr size_t kMaxPlansInFlight = 2;

}  // namespace

Engine::Engine(EngineConfig config, const ModelFrontend* model, RouterMetrics* metrics)
    : config_(std::move(config)), model_(model), metrics_(metrics),
      log_(config_.log != nullptr ? config_.log : MakeNullLogger()) {
  if (metrics_ == nullptr) {
    owned_metrics_ = std::make_unique<RouterMetrics>(
        std::make_shared<prometheus::Registry>(),
        RouterMetricsOptions{.max_num_batched_tokens = config_.max_num_batched_tokens});
    metrics_ = owned_metrics_.get();
  }
  WorkerClientCallbacks callbacks{
      .on_connected =
          [this](uint64_t epoch, wv1::DescribeResponse description) {
            events_.Push(WorkerConnected{epoch, std::move(description)});
          },
      .on_result =
          [this](uint64_t epoch, wv1::StepResult result) {
            events_.Push(WorkerResult{epoch, std::move(result)});
          },
      .on_lost = [this](uint64_t epoch,
                        absl::Status status) { events_.Push(WorkerLost{epoch, status}); },
  };
  worker_client_ = std::make_unique<WorkerClient>(
      WorkerClientConfig{.address = config_.worker_address,
                         .initial_backoff = config_.reconnect_backoff,
                         .max_backoff = config_.max_reconnect_backoff,
                         .secret = config_.worker_secret},
      std::move(callbacks));
  preparer_ = std::make_unique<GrammarPreparer>(worker_client_.get());
}

Engine::~Engine() { Stop(); }

void Engine::Start() {
  thread_ = std::thread([this] { Loop(); });
  worker_client_->Start();
}

void Engine::Stop() {
  preparer_->Stop();  // queued compiles are refused; no event comes from it after this
  if (!thread_.joinable()) return;
  worker_client_->Stop();
  events_.Push(Shutdown{});
  thread_.join();
}

uint64_t Engine::Submit(ValidatedRequest request, std::shared_ptr<ResponseSink> sink,
                        std::optional<Clock::time_point> deadline) {
  const uint64_t id = next_id_.fetch_add(1);
  if (request.grammar.kind() != wv1::GRAMMAR_KIND_NONE) {
    SubmitAfterPrepare(NewRequest{id, std::move(request), std::move(sink), Clock::now(), deadline});
    return id;
  }
  events_.Push(NewRequest{id, std::move(request), std::move(sink), Clock::now(), deadline});
  return id;
}

// A guided request's grammar is compiled by the worker first (grammar_preparer.h), so no step
// of the worker waits for it; the request reaches the engine after, or its sink gets the
// worker's refusal. A cancel meanwhile is remembered in preparing_ and honoured on return.
void Engine::SubmitAfterPrepare(NewRequest event) {
  const uint64_t id = event.id;
  auto pending = std::make_shared<NewRequest>(std::move(event));
  {
    std::lock_guard<std::mutex> lock(preparing_mutex_);
    preparing_[id] = false;
  }
  wv1::Grammar grammar = pending->request.grammar;
  const bool queued = preparer_->Enqueue(std::move(grammar), [this, pending](absl::Status status) {
    bool cancelled = false;
    {
      std::lock_guard<std::mutex> lock(preparing_mutex_);
      cancelled = preparing_[pending->id];
      preparing_.erase(pending->id);
    }
    if (cancelled) status = absl::CancelledError("cancelled by the client");
    if (!status.ok()) {
      metrics_->ObserveRejected();
      pending->sink->Close({}, status);
      return;
    }
    events_.Push(std::move(*pending));
  });
  if (!queued) {
    {
      std::lock_guard<std::mutex> lock(preparing_mutex_);
      preparing_.erase(id);
    }
    metrics_->ObserveRejected();
    pending->sink->Close({}, absl::ResourceExhaustedError(
                                 "too many structured-output requests are waiting for their "
                                 "grammar to compile; retry later"));
  }
}

void Engine::Cancel(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(preparing_mutex_);
    if (auto it = preparing_.find(id); it != preparing_.end()) it->second = true;
  }
  events_.Push(CancelRequest{id});
}


void Engine::BeginDrain(Clock::time_point deadline) {
  draining_ = true;
  events_.Push(Drain{deadline});
}

std::optional<wv1::DescribeResponse> Engine::worker() const {
  std::lock_guard<std::mutex> lock(shared_mutex_);
  return worker_;
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(shared_mutex_);
  return stats_;
}

std::vector<WorkerStatus> Engine::workers() const {
  return {WorkerStatus{.index = 0,
                       .address = config_.worker_address,
                       .serving = serving(),
                       .stats = stats(),
                       .description = worker()}};
}

void Engine::Loop() {
  std::deque<Event> events;
  while (!stopping_) {
    const bool sent = SendPlans();
    // Block only when nothing could be sent; wake at least every 100 ms for drain deadlines.
    events_.PopAll(/*wait=*/!sent, Clock::now() + std::chrono::milliseconds(100), &events);
    while (!events.empty()) {
      Handle(events.front());
      events.pop_front();
    }
    CheckDrain(Clock::now());
    CheckStalls(Clock::now());
    CheckQueueTimes(Clock::now());
    CheckDeadlines(Clock::now());
    PublishStats();
  }
  FailAll(absl::CancelledError("the router is shutting down"));
}

void Engine::Handle(Event& event) {
  std::visit(
      [this](auto& e) {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, NewRequest>) HandleNew(e);
        if constexpr (std::is_same_v<T, CancelRequest>) HandleCancel(e);
        if constexpr (std::is_same_v<T, ResumeRequest>) HandleResume(e);
        if constexpr (std::is_same_v<T, WorkerConnected>) HandleConnected(e);
        if constexpr (std::is_same_v<T, WorkerResult>) HandleResult(e);
        if constexpr (std::is_same_v<T, WorkerLost>) HandleLost(e);
        if constexpr (std::is_same_v<T, Drain>) {
          drain_deadline_ = e.deadline;
          log_->info("event=drain_begin requests={}", requests_.size());
        }
        if constexpr (std::is_same_v<T, Shutdown>) stopping_ = true;
      },
      event);
}

void Engine::HandleNew(NewRequest& event) {
  if (draining_ || stopping_) {
    metrics_->ObserveRejected();
    event.sink->Close({}, absl::UnavailableError("the server is shutting down"));
    return;
  }
  if (scheduler_ == nullptr) {
    metrics_->ObserveRejected();
    event.sink->Close({}, absl::UnavailableError(
                              worker_unusable_.empty()
                                  ? "no worker is connected; retry later"
                                  : absl::StrCat("the worker cannot be used: ", worker_unusable_)));
    return;
  }
  absl::Status admitted = scheduler_->AddRequest(event.id, event.request.prompt_tokens,
                                                 event.request.max_tokens,
                                                 event.request.cache_salt);
  if (!admitted.ok()) {
    metrics_->ObserveRejected();
    LogRejected(admitted);
    event.sink->Close({}, admitted);
    return;
  }
  if (event.deadline.has_value()) deadlines_.emplace(*event.deadline, event.id);
  requests_[event.id] = std::make_unique<RequestOutput>(
      std::move(event.request), std::move(event.sink), event.arrival, *model_->tokenizer,
      eos_token_ids_, metrics_);
}

void Engine::HandleCancel(const CancelRequest& event) {
  auto it = requests_.find(event.id);
  if (it == requests_.end()) return;  // already finished
  (void)scheduler_->Finish(event.id, FinishReason::kCancelled);
  it->second->Close(v1::FINISH_REASON_CANCELLED, absl::CancelledError("cancelled by the client"));
  requests_.erase(it);
}

void Engine::HandleConnected(WorkerConnected& event) {
  epoch_ = event.epoch;
  in_flight_.clear();
  next_step_ = 1;
  const wv1::DescribeResponse& d = event.description;
  const std::vector<int32_t> eos(d.eos_token_ids().begin(), d.eos_token_ids().end());
  if (absl::Status fits = CheckWorkerEosFitsTokenizer(eos, model_->tokenizer->info().vocab_size);
      !fits.ok()) {
    RefuseWorker(d, std::string(fits.message()));
    return;
  }
  published_prefixes_.Clear();  // a new scheduler starts with an empty cache
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler = Scheduler::Create(SchedulerConfig{
      // A device worker sizes its step buffers once: never plan more tokens than it holds.
      .max_num_batched_tokens = d.max_num_batched_tokens() > 0
                                    ? std::min(config_.max_num_batched_tokens,
                                               d.max_num_batched_tokens())
                                    : config_.max_num_batched_tokens,
      .max_num_seqs = std::min(config_.max_num_seqs, d.max_num_seqs()),
      .block_size = d.block_size(),
      .num_blocks = static_cast<int32_t>(d.num_kv_blocks()),
      .max_context = d.max_context(),
      .max_waiting = config_.max_waiting,
      // A hybrid model's worker shares prefixes only with state snapshots (DESIGN.md §4).
      .enable_prefix_cache = config_.enable_prefix_cache && WorkerSharesPrefixes(d),
      .published_prefixes = config_.publish_prefixes ? &published_prefixes_ : nullptr,
      .state_snapshot_slots =
          d.prefix_sharing() == wv1::PREFIX_SHARING_STATE_SNAPSHOTS ? d.state_snapshot_slots() : 0,
      .reserve_horizon_tokens = config_.reserve_horizon_tokens,
  });
  if (!scheduler.ok()) {
    // A worker whose capacity we cannot use: stay NOT_SERVING and say why.
    RefuseWorker(d, std::string(scheduler.status().message()));
    return;
  }
  worker_unusable_.clear();
  scheduler_ = std::move(*scheduler);
  const bool publishes = config_.publish_prefixes && scheduler_->config().enable_prefix_cache;
  block_size_.store(publishes ? d.block_size() : 0);
  eos_token_ids_.assign(d.eos_token_ids().begin(), d.eos_token_ids().end());
  metrics_->SetPrefixCacheEnabled(scheduler_->config().enable_prefix_cache);
  {
    std::lock_guard<std::mutex> lock(shared_mutex_);
    worker_ = event.description;
  }
  connected_ = true;
  log_->info("event={} worker={} epoch={} kv_blocks={} block_size={} max_seqs={}",
             num_connections_ == 0 ? "worker_connected" : "worker_restored",
             LogValue(d.worker_id()), event.epoch, d.num_kv_blocks(), d.block_size(),
             d.max_num_seqs());
  if (num_connections_ > 0) metrics_->ObserveWorkerRestored();
  ++num_connections_;
  storm_window_start_ = Clock::now();
  storm_window_base_ = 0;
}

void Engine::RefuseWorker(const wv1::DescribeResponse& d, std::string reason) {
  log_->error("event=worker_unusable worker={} reason={}", LogValue(d.worker_id()),
              LogValue(reason));
  worker_unusable_ = std::move(reason);
}

void Engine::HandleResult(WorkerResult& event) {
  if (event.epoch != epoch_ || in_flight_.empty()) return;  // a stream we gave up on
  InFlightStep step = std::move(in_flight_.front());
  in_flight_.pop_front();
  const wv1::StepResult& result = event.result;
  if (result.step() != step.step ||
      static_cast<size_t>(result.sampled_size()) != step.sampling_requests.size()) {
    // The worker is another process: a malformed answer is bad input, not our broken
    // invariant. Treat it as a lost worker and start over on a fresh stream.
    AbandonWorker(absl::StrCat("the worker answered plan ", step.step, " with result ",
                               result.step(), " carrying ", result.sampled_size(),
                               " tokens (expected ", step.sampling_requests.size(), ")"));
    return;
  }
  if (config_.step_recorder != nullptr) {
    config_.step_recorder->OnResult(step.step, result, Clock::now());
  }
  for (int i = 0; i < result.sampled_size(); ++i) {
    ApplySampled(step.sampling_requests[i], result.sampled(i));
  }
  std::lock_guard<std::mutex> lock(shared_mutex_);
  stats_.worker_active_slots = result.active_slots();
}

void Engine::ApplySampled(uint64_t request_id, const wv1::SampledToken& sampled) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;  // finished or cancelled after the plan went out
  absl::StatusOr<SampleOutcome> outcome = scheduler_->OnTokenSampled(request_id, sampled.token_id());
  TESSERA_CHECK(outcome.ok(), "a sampled token for a live request the scheduler did not expect");
  const bool finished = it->second->Accept(sampled, Clock::now());
  TESSERA_CHECK(finished || *outcome != SampleOutcome::kFinishedLength,
                "the scheduler ended a request at max_tokens but its output did not");
  if (finished) {
    if (*outcome != SampleOutcome::kFinishedLength) {
      (void)scheduler_->Finish(request_id, FinishReason::kStop);
    }
    requests_.erase(it);
    return;
  }
  PauseIfBacklogged(request_id, *it->second);
}

void Engine::PauseIfBacklogged(uint64_t id, RequestOutput& output) {
  if (paused_.contains(id) || !output.sink().Backlogged()) return;
  (void)scheduler_->SetPaused(id, true);
  paused_[id] = Clock::now();
  output.sink().NotifyWhenDrained([this, id] { events_.Push(ResumeRequest{id}); });
}

void Engine::HandleResume(const ResumeRequest& event) {
  if (paused_.erase(event.id) == 0 || scheduler_ == nullptr) return;
  (void)scheduler_->SetPaused(event.id, false);
}

void Engine::CheckQueueTimes(Clock::time_point now) {
  if (config_.max_queue_time.count() <= 0 || scheduler_ == nullptr ||
      now - last_queue_check_ < std::chrono::milliseconds(100)) {
    return;
  }
  last_queue_check_ = now;
  for (auto it = requests_.begin(); it != requests_.end();) {
    RequestOutput& output = *it->second;
    if (output.ever_scheduled() || now - output.arrival() < config_.max_queue_time) {
      ++it;
      continue;
    }
    (void)scheduler_->Finish(it->first, FinishReason::kCancelled);
    output.Close(v1::FINISH_REASON_ERROR,
                 absl::ResourceExhaustedError(absl::StrCat(
                     "the request waited ",
                     std::chrono::duration<double>(config_.max_queue_time).count(),
                     " s without being scheduled (--max-queue-time); the server is busy, "
                     "retry later")));
    requests_.erase(it++);
  }
}

void Engine::CheckDeadlines(Clock::time_point now) {
  // Entries of requests that ended early wait for their deadline: rebuild when they dominate, so
  // the heap stays O(live requests).
  if (deadlines_.size() > 2 * requests_.size() + 64) {
    std::vector<Deadline> live;
    for (; !deadlines_.empty(); deadlines_.pop()) {
      if (requests_.contains(deadlines_.top().second)) live.push_back(deadlines_.top());
    }
    deadlines_ = decltype(deadlines_)(std::greater<Deadline>(), std::move(live));
  }
  while (!deadlines_.empty() && deadlines_.top().first <= now) {
    const uint64_t id = deadlines_.top().second;
    deadlines_.pop();
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;  // ended before its deadline
    if (scheduler_ != nullptr) (void)scheduler_->Finish(id, FinishReason::kCancelled);
    it->second->Close(v1::FINISH_REASON_CANCELLED,
                      absl::DeadlineExceededError(
                          "the client's deadline passed before the request finished"));
    requests_.erase(it);
  }
}

void Engine::CheckStalls(Clock::time_point now) {
  for (auto it = paused_.begin(); it != paused_.end();) {
    auto request = requests_.find(it->first);
    if (request == requests_.end() || scheduler_ == nullptr) {
      paused_.erase(it++);
      continue;
    }
    const Clock::time_point since = std::max(it->second, request->second->sink().LastRead());
    if (now - since < config_.stream_stall_timeout) {
      ++it;
      continue;
    }
    (void)scheduler_->Finish(it->first, FinishReason::kCancelled);
    request->second->Close(
        v1::FINISH_REASON_CANCELLED,
        absl::DeadlineExceededError(absl::StrCat(
            "the client read no output for ",
            std::chrono::duration<double>(config_.stream_stall_timeout).count(),
            " s (--stream-stall-timeout); the request was cancelled")));
    requests_.erase(request);
    paused_.erase(it++);
  }
}

void Engine::HandleLost(const WorkerLost& event) {
  if (event.epoch != epoch_) return;
  log_->warn("event=worker_lost epoch={} failed_requests={} status={}", event.epoch,
             requests_.size(), LogValue(event.status.ToString()));
  connected_ = false;
  in_flight_.clear();
  FailAll(absl::UnavailableError(
      absl::StrCat("the worker connection was lost: ", event.status.message())));
  paused_.clear();
  scheduler_.reset();
  published_prefixes_.Clear();
  block_size_.store(0);
}

std::string Engine::RequestName(uint64_t id) const {
  auto it = requests_.find(id);
  if (it != requests_.end() && !it->second->request().request_id.empty()) {
    return it->second->request().request_id;
  }
  return absl::StrCat(id);
}

void Engine::AbandonWorker(const std::string& why) {
  log_->error("event=worker_abandoned reason={}", LogValue(why));
  worker_client_->Abandon(epoch_);
  HandleLost(WorkerLost{epoch_, absl::InternalError(why)});
}

void Engine::FailAll(const absl::Status& status) {
  const v1::FinishReason reason = absl::IsCancelled(status) ? v1::FINISH_REASON_CANCELLED
                                                            : v1::FINISH_REASON_ERROR;
  for (auto& [id, output] : requests_) {
    if (scheduler_ != nullptr) (void)scheduler_->Finish(id, FinishReason::kError);
    output->Close(reason, status);
  }
  requests_.clear();
}

bool Engine::SendPlans() {
  bool sent = false;
  while (scheduler_ != nullptr && in_flight_.size() < kMaxPlansInFlight) {
    ScheduledStep& step = step_;
    const Clock::time_point schedule_start = Clock::now();
    scheduler_->Schedule(&step);
    const double schedule_seconds =
        std::chrono::duration<double>(Clock::now() - schedule_start).count();
    metrics_->ObserveStep(step, schedule_seconds);
    for (const FailedRequest& failed : step.failed) {
      auto it = requests_.find(failed.request_id);
      if (it == requests_.end()) continue;
      it->second->Close(v1::FINISH_REASON_ERROR, failed.status);
      requests_.erase(it);
    }
    if (!step.ShouldSend()) break;
    wv1::StepPlan plan;
    InFlightStep in_flight;
    BuildPlan(step, &plan, &in_flight);
    if (!worker_client_->Send(epoch_, plan)) break;  // WorkerLost follows
    if (config_.step_recorder != nullptr) {
      config_.step_recorder->OnPlanSent(
          in_flight.step, step, [this](uint64_t id) { return RequestName(id); },
          schedule_seconds, in_flight.sent);
    }
    in_flight_.push_back(std::move(in_flight));
    ++steps_sent_;
    sent = true;
  }
  return sent;
}

// The request's grammar, ended by its EOS and stop tokens (EOS even under ignore_eos: once the
// grammar is complete nothing else may follow).
void Engine::SetGrammar(const ValidatedRequest& request, wv1::Grammar* grammar) const {
  *grammar = request.grammar;
  grammar->mutable_stop_token_ids()->Add(eos_token_ids_.begin(), eos_token_ids_.end());
  for (const int32_t id : request.stop_token_ids) {
    if (std::find(eos_token_ids_.begin(), eos_token_ids_.end(), id) == eos_token_ids_.end()) {
      grammar->add_stop_token_ids(id);
    }
  }
}

void Engine::BuildPlan(const ScheduledStep& step, wv1::StepPlan* plan, InFlightStep* in_flight) {
  const Clock::time_point now = Clock::now();
  in_flight->step = next_step_++;
  in_flight->sent = now;
  plan->set_step(in_flight->step);
  for (int32_t slot : step.dropped_slots) plan->add_drop_slots(slot);
  for (const ScheduledRequest& scheduled : step.requests) {
    if (scheduled.is_new) {
      RequestOutput& output = *requests_.at(scheduled.request_id);
      output.OnScheduled(now, scheduled.start_position);
      wv1::NewSequence* sequence = plan->add_new_sequences();
      sequence->set_slot(scheduled.slot);
      *sequence->mutable_sampling() = output.request().sampling;
      if (output.request().grammar.kind() != wv1::GRAMMAR_KIND_NONE) {
        SetGrammar(output.request(), sequence->mutable_grammar());
      }
      const std::span<const int32_t> tokens =
          scheduler_->Tokens(scheduled.request_id).first(scheduled.num_known_tokens);
      sequence->mutable_tokens()->Add(tokens.begin(), tokens.end());
      sequence->set_num_prompt_tokens(scheduled.num_prompt_tokens);
      sequence->set_num_cached_tokens(scheduled.start_position);
      sequence->set_restore_snapshot(scheduled.restore_snapshot);
    }
    wv1::SequenceStep* sequence = plan->add_sequences();
    sequence->set_slot(scheduled.slot);
    sequence->set_num_tokens(scheduled.num_tokens);
    const std::span<const BlockId> blocks = step.NewBlocks(scheduled);
    sequence->mutable_new_blocks()->Add(blocks.begin(), blocks.end());
    sequence->set_save_snapshot(scheduled.save_snapshot);
    if (scheduled.samples) in_flight->sampling_requests.push_back(scheduled.request_id);
  }
}

void Engine::CheckDrain(Clock::time_point now) {
  if (!draining_) return;
  if (drain_deadline_.has_value() && now >= *drain_deadline_ && !requests_.empty()) {
    for (auto& [id, output] : requests_) {
      if (scheduler_ != nullptr) (void)scheduler_->Finish(id, FinishReason::kCancelled);
      output->Close(v1::FINISH_REASON_CANCELLED,
                    absl::CancelledError("the server shut down before the request finished"));
    }
    requests_.clear();
  }
  if (requests_.empty()) {
    drained_ = true;
    if (!drain_logged_) log_->info("event=drain_end");
    drain_logged_ = true;
  }
}

void Engine::LogRejected(const absl::Status& status) {
  const Clock::time_point now = Clock::now();
  if (now - last_rejection_log_ < std::chrono::seconds(1)) {
    ++rejections_unlogged_;
    return;
  }
  log_->warn("event=request_rejected code={} reason={} unlogged_since_last={}",
             absl::StatusCodeToString(status.code()), LogValue(std::string(status.message())),
             rejections_unlogged_);
  last_rejection_log_ = now;
  rejections_unlogged_ = 0;
}

void Engine::CheckPreemptionStorm(int64_t total_preemptions, Clock::time_point now) {
  if (now - storm_window_start_ < config_.preemption_storm_window) return;
  const int64_t in_window = total_preemptions - storm_window_base_;
  if (in_window >= config_.preemption_storm_threshold) {
    const SchedulerStats s = scheduler_->stats();
    log_->warn("event=preemption_storm preemptions={} window_s={} running={} waiting={} "
               "kv_blocks_used={} kv_blocks_total={}",
               in_window,
               std::chrono::duration<double>(config_.preemption_storm_window).count(),
               s.num_running, s.num_waiting, s.num_blocks_used, s.num_blocks_total);
  }
  storm_window_start_ = now;
  storm_window_base_ = total_preemptions;
}

void Engine::PublishStats() {
  std::lock_guard<std::mutex> lock(shared_mutex_);
  stats_.worker_connected = connected_;
  stats_.steps = steps_sent_;
  if (scheduler_ == nullptr) {
    metrics_->ObserveScheduler(nullptr);
    stats_.requests_running = stats_.requests_waiting = 0;
    stats_.kv_blocks_used = 0;
    stats_.kv_blocks_total = 0;  // no worker, no pool: agrees with kv_blocks_capacity (issue 15)
    stats_.kv_blocks_cached = 0;
    return;
  }
  const SchedulerStats s = scheduler_->stats();
  metrics_->ObserveScheduler(&s);
  CheckPreemptionStorm(s.num_preemptions, Clock::now());
  stats_.requests_running = s.num_running;
  stats_.requests_waiting = s.num_waiting;
  stats_.kv_blocks_used = s.num_blocks_used;
  stats_.kv_blocks_total = s.num_blocks_total;
  stats_.kv_blocks_cached = s.num_blocks_cached_free;
  stats_.preemptions = s.num_preemptions;
  stats_.prefix_cache_query_tokens = s.prefix_cache_query_tokens;
  stats_.prefix_cache_hit_tokens = s.prefix_cache_hit_tokens;
}

}  // namespace tessera::router
