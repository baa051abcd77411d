// Data parallel behind one router (DESIGN.md §12): one Engine per worker, each its own scheduler
// core (its KV blocks, prefix cache, step stream and plans in flight), and the frontends talking
// to this group through RequestEngine as they would to one engine.
//
// Routing rule (RouteNew), over the engines that are serving (worker connected, not draining):
//   1. Cached prefix against load. Each engine publishes the hashes of the blocks its prefix
//      cache holds (published_prefixes.h); the request's prompt is hashed into the same block
//      chain once (PrefixCache::PromptChain) and each engine's cached prefix is the chain's
//      leading blocks it holds. Among engines holding at least one block whose load (requests
//      outstanding: submitted through this group and not yet closed) is at most the least
//      loaded engine's + max(kPrefixLoadSlack, half of it), the one with the longest cached
//      prefix wins; ties: lower load, then the lower index.
//   2. Otherwise load: the fewest requests outstanding; ties go to the most free KV blocks, then
//      to the lowest index.
// When none is serving, engine 0 takes the request and gives the client its reason.
// Routing::kRoundRobin (tessera-router --routing round-robin, for comparisons only: benchmarks
// of the rule above) instead takes the serving engines in turn.
//
// Ids: the group's id of a request is engine id * N + engine index, so Cancel finds its engine
// without a table. A lost worker fails only its own engine's requests; the others keep serving.
//
// Threading: every method is safe from any thread; the outstanding counts are atomics updated at
// Submit and by the counting sink's Close (an engine thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "router/engine.h"
#include "router/request_engine.h"

namespace tessera::router {

// A longer cached prefix wins over up to this many more outstanding requests (or half of the
// least loaded engine's, when more).
inline constexpr int64_t kPrefixLoadSlack = 4;

class EngineGroup : public RequestEngine {
 public:
  enum class Routing { kPrefixAndLoad, kRoundRobin };

  // Preconditions: at least one engine; each configured with publish_prefixes (else rule 1 sees
  // no cached prefix on it).
  explicit EngineGroup(std::vector<std::unique_ptr<Engine>> engines,
                       Routing routing = Routing::kPrefixAndLoad);
  ~EngineGroup() override;  // Stop()

  void Start() override;
  void Stop() override;
  uint64_t Submit(ValidatedRequest request, std::shared_ptr<ResponseSink> sink,
                  std::optional<std::chrono::steady_clock::time_point> deadline =
                      std::nullopt) override;
  void Cancel(uint64_t id) override;
  void BeginDrain(std::chrono::steady_clock::time_point deadline) override;
  bool Drained() const override;
  // The first connected engine's worker (every worker serves the same model).
  std::optional<wv1::DescribeResponse> worker() const override;
  bool serving() const override;
  // Sums over the engines (worker_connected: any).
  EngineStats stats() const override;
  // One per engine, by index.
  std::vector<WorkerStatus> workers() const override;

  int size() const { return static_cast<int>(engines_.size()); }
  // The engine the rule above picks for a new request with this prompt and cache salt now.
  int RouteNew(std::span<const int32_t> prompt, std::string_view salt) const;
  // The next serving engine in turn after the last one this gave (0 when none serves).
  int RouteRoundRobin();
  // Requests outstanding on engine `index`.
  int64_t outstanding(int index) const;

 private:
  class CountingSink;
  // Rule 2 among the serving engines (-1: none serving).
  int LeastLoaded() const;

  std::vector<std::unique_ptr<Engine>> engines_;
  std::vector<std::shared_ptr<std::atomic<int64_t>>> outstanding_;  // per engine
  const Routing routing_;
  std::atomic<uint64_t> next_turn_{0};  // kRoundRobin
};

}  // namespace tessera::router
