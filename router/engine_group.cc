#include "router/engine_group.h"

#include <algorithm>
#include <utility>

#include "common/util/check.h"
#include "router/prefix_cache.h"

namespace tessera::router {

// Forwards everything to the client's sink; Close also counts the request out of its engine.
class EngineGroup::CountingSink : public ResponseSink {
 public:
  CountingSink(std::shared_ptr<ResponseSink> inner, std::shared_ptr<std::atomic<int64_t>> count)
      : inner_(std::move(inner)), count_(std::move(count)) {}
  bool Backlogged() const override { return inner_->Backlogged(); }
  void NotifyWhenDrained(std::function<void()> on_drained) override {
    inner_->NotifyWhenDrained(std::move(on_drained));
  }
  std::chrono::steady_clock::time_point LastRead() const override { return inner_->LastRead(); }
  void Send(::tessera::v1::GenerateResponse response) override {
    inner_->Send(std::move(response));
  }
  void Close(::tessera::v1::GenerateResponse last, absl::Status status) override {
    count_->fetch_sub(1);
    inner_->Close(std::move(last), std::move(status));
  }

 private:
  std::shared_ptr<ResponseSink> inner_;
  std::shared_ptr<std::atomic<int64_t>> count_;
};

EngineGroup::EngineGroup(std::vector<std::unique_ptr<Engine>> engines, Routing routing)
    : engines_(std::move(engines)), routing_(routing) {
  TESSERA_CHECK(!engines_.empty(), "EngineGroup: no engine");
  for (size_t i = 0; i < engines_.size(); ++i) {
    outstanding_.push_back(std::make_shared<std::atomic<int64_t>>(0));
  }
}

EngineGroup::~EngineGroup() { Stop(); }

void EngineGroup::Start() {
  for (auto& engine : engines_) engine->Start();
}

void EngineGroup::Stop() {
  for (auto& engine : engines_) engine->Stop();
}

int EngineGroup::LeastLoaded() const {
  int best = -1;
  int64_t best_load = 0, best_free = 0;
  for (int i = 0; i < size(); ++i) {
    if (!engines_[static_cast<size_t>(i)]->serving()) continue;
    const int64_t load = outstanding(i);
    const EngineStats stats = engines_[static_cast<size_t>(i)]->stats();
    const int64_t free_blocks = stats.kv_blocks_total - stats.kv_blocks_used;
    if (best < 0 || load < best_load || (load == best_load && free_blocks > best_free)) {
      best = i;
      best_load = load;
      best_free = free_blocks;
    }
  }
  return best;
}

int EngineGroup::RouteNew(std::span<const int32_t> prompt, std::string_view salt) const {
  const int least = LeastLoaded();
  if (least < 0) return 0;
  const int64_t least_load = outstanding(least);
  const int64_t allowed = least_load + std::max(kPrefixLoadSlack, least_load / 2);
  std::vector<uint64_t> chain;  // every engine serves the same model: one block size
  int best = -1, best_blocks = 0;
  for (int i = 0; i < size(); ++i) {
    const Engine& e = *engines_[static_cast<size_t>(i)];
    if (!e.serving() || e.prefix_block_size() <= 0 || outstanding(i) > allowed) continue;
    if (chain.empty()) chain = PrefixCache::PromptChain(prompt, salt, e.prefix_block_size());
    const int blocks = e.published_prefixes().MatchedBlocks(chain);
    if (blocks > best_blocks ||
        (blocks == best_blocks && blocks > 0 && outstanding(i) < outstanding(best))) {
      best = i;
      best_blocks = blocks;
    }
  }
  return best >= 0 ? best : least;
}

int EngineGroup::RouteRoundRobin() {
  for (int tries = 0; tries < size(); ++tries) {
    const int index = static_cast<int>(next_turn_.fetch_add(1) % engines_.size());
    if (engines_[static_cast<size_t>(index)]->serving()) return index;
  }
  return 0;
}

int64_t EngineGroup::outstanding(int index) const {
  return outstanding_[static_cast<size_t>(index)]->load();
}

uint64_t EngineGroup::Submit(ValidatedRequest request, std::shared_ptr<ResponseSink> sink,
                             std::optional<std::chrono::steady_clock::time_point> deadline) {
  const int index = routing_ == Routing::kRoundRobin
                        ? RouteRoundRobin()
                        : RouteNew(request.prompt_tokens, request.cache_salt);
  const auto& count = outstanding_[static_cast<size_t>(index)];
  count->fetch_add(1);
  auto counting = std::make_shared<CountingSink>(std::move(sink), count);
  Engine& engine = *engines_[static_cast<size_t>(index)];
  const uint64_t id = engine.Submit(std::move(request), std::move(counting), deadline);
  return id * engines_.size() + static_cast<uint64_t>(index);
}

void EngineGroup::Cancel(uint64_t id) {
  engines_[id % engines_.size()]->Cancel(id / engines_.size());
}

void EngineGroup::BeginDrain(std::chrono::steady_clock::time_point deadline) {
  for (auto& engine : engines_) engine->BeginDrain(deadline);
}

bool EngineGroup::Drained() const {
  for (const auto& engine : engines_) {
    if (!engine->Drained()) return false;
  }
  return true;
}

std::optional<wv1::DescribeResponse> EngineGroup::worker() const {
  for (const auto& engine : engines_) {
    if (auto described = engine->worker()) return described;
  }
  return std::nullopt;
}

bool EngineGroup::serving() const {
  for (const auto& engine : engines_) {
    if (engine->serving()) return true;
  }
  return false;
}

EngineStats EngineGroup::stats() const {
  EngineStats total;
  for (const auto& engine : engines_) {
    const EngineStats s = engine->stats();
    total.requests_running += s.requests_running;
    total.requests_waiting += s.requests_waiting;
    total.kv_blocks_used += s.kv_blocks_used;
    total.kv_blocks_total += s.kv_blocks_total;
    total.kv_blocks_cached += s.kv_blocks_cached;
    total.worker_connected = total.worker_connected || s.worker_connected;
    total.worker_active_slots += s.worker_active_slots;
    total.steps += s.steps;
    total.preemptions += s.preemptions;
    total.prefix_cache_query_tokens += s.prefix_cache_query_tokens;
    total.prefix_cache_hit_tokens += s.prefix_cache_hit_tokens;
  }
  return total;
}

std::vector<WorkerStatus> EngineGroup::workers() const {
  std::vector<WorkerStatus> all;
  for (int i = 0; i < size(); ++i) {
    WorkerStatus status = engines_[static_cast<size_t>(i)]->workers().front();
    status.index = i;
    all.push_back(std::move(status));
  }
  return all;
}

}  // namespace tessera::router
