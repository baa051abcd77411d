// Issue 27's data-parallel e2e: one router over three cpu workers (the default model), and over
// two emulated cuda workers (a tiny model; the SIMT emulator is slow, so its prompts are short).
//   - 64 concurrent requests spread by load: every worker finishes a fair share;
//   - requests sharing a 512-token system prompt go to the worker that caches it, and hit there;
//   - killing one worker fails only its own requests, the rest finish;
//   - a cancel reaches the worker its request runs on;
//   - /metrics carries each worker's series under its `worker` label (every check reads them).
// Prompts are token ids, so the shared prefix is exactly 512 tokens (32 blocks of 16).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/metrics_scrape.h"
#include "tests/e2e/serving_harness.h"
#include "tests/unique_temp_path.h"
#include "tools/convert/tiny_model.h"

namespace tessera::e2e {
namespace {

namespace v1 = ::tessera::v1;

// `length` prompt ids starting at `first`, then `max_tokens` greedy tokens past any EOS.
v1::GenerateRequest Ids(int first, int length, int max_tokens) {
  v1::GenerateRequest request;
  for (int i = 0; i < length; ++i) request.mutable_token_ids()->add_ids(3 + (first + i) % 240);
  request.mutable_sampling()->set_temperature(0.0f);
  request.set_max_tokens(max_tokens);
  request.set_ignore_eos(true);
  return request;
}

// A shared system prompt of `prefix` ids, then 8 ids of question `question`.
v1::GenerateRequest SharedPrefix(int prefix, int question, int max_tokens) {
  v1::GenerateRequest request = Ids(0, prefix, max_tokens);
  for (int i = 0; i < 8; ++i) request.mutable_token_ids()->add_ids(100 + question * 8 + i);
  return request;
}

std::string Series(const std::string& name, int worker) {
  return name + "{worker=\"" + std::to_string(worker) + "\"}";
}

std::string Cancelled(int worker) {
  return "tessera_requests_total{status=\"cancelled\",worker=\"" + std::to_string(worker) + "\"}";
}

// Starts one worker plus `extra` more with `worker_args`, then the router; fails unless every
// engine has described its worker within 60 s.
void StartGroup(ServingProcesses& serving, int extra, const std::vector<std::string>& worker_args) {
  ASSERT_TRUE(serving.StartWorker(worker_args).ok());
  for (int i = 0; i < extra; ++i) ASSERT_TRUE(serving.StartExtraWorker(worker_args).ok());
  ASSERT_TRUE(serving.StartRouter({"--metrics-port", "0"}).ok());
  for (int i = 0; i < 600; ++i) {
    const std::string m = ScrapeMetrics(serving.router_metrics_address());
    int described = 0;
    for (int w = 0; w <= extra; ++w) {
      described += SeriesValue(m, Series("tessera_kv_blocks_capacity", w)) > 0 ? 1 : 0;
    }
    if (described == extra + 1) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  FAIL() << "the router did not connect every worker";
}

// Polls until the finished counts of workers [0, n) sum to `total`; the last scrape.
std::string AwaitFinishedTotal(const ServingProcesses& serving, int n, double total) {
  std::string m;
  for (int i = 0; i < 500; ++i) {
    m = ScrapeMetrics(serving.router_metrics_address());
    double sum = 0;
    for (int w = 0; w < n; ++w) sum += std::max(0.0, FinishedOn(m, w));
    if (sum >= total) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return m;
}

// Holds workers [0, busy) with one long request each (the tie rule fills them in index order),
// so the next request goes to worker `busy`; returns the holders' threads.
std::vector<std::thread> HoldWorkers(const ServingProcesses& serving, int busy, int max_tokens) {
  std::vector<std::thread> holders;
  for (int w = 0; w < busy; ++w) {
    holders.emplace_back([&serving, w, max_tokens] {
      RunGenerate(*serving.NewStub(), Ids(50 * w, 8, max_tokens));
    });
    AwaitSeries(serving.router_metrics_address(), Series("tessera_requests_running", w), 1);
  }
  return holders;
}

// The first request with the shared prefix runs on worker `cacher` (the ones before it are
// busy); once all are idle, `later` more go there too, where the tie rule alone would pick
// worker 0, and hit its cache for the whole prefix.
void ExpectPrefixFollowsItsCache(const ServingProcesses& serving, int cacher, int prefix,
                                 int later) {
  const std::string finished =
      "tessera_requests_total{status=\"length\",worker=\"" + std::to_string(cacher) + "\"}";
  const double base = SeriesValue(ScrapeMetrics(serving.router_metrics_address()), finished);
  std::vector<std::thread> holders = HoldWorkers(serving, cacher, 60);
  ASSERT_TRUE(RunGenerate(*serving.NewStub(), SharedPrefix(prefix, 0, 2)).status.ok());
  for (std::thread& t : holders) t.join();
  std::string m = AwaitSeries(serving.router_metrics_address(), finished, base + 1);
  ASSERT_EQ(SeriesValue(m, finished), base + 1) << "the first shared-prefix request ran elsewhere";
  const v1::WorkerStats before = serving.Stats().workers(cacher);
  for (int q = 1; q <= later; ++q) {
    ASSERT_TRUE(RunGenerate(*serving.NewStub(), SharedPrefix(prefix, q, 2)).status.ok());
  }
  m = AwaitSeries(serving.router_metrics_address(), finished, base + 1 + later);
  EXPECT_EQ(SeriesValue(m, finished), base + 1 + later) << m;
  const v1::WorkerStats after = serving.Stats().workers(cacher);
  const double hits = after.prefix_cache_hit_tokens() - before.prefix_cache_hit_tokens();
  const double queries = after.prefix_cache_query_tokens() - before.prefix_cache_query_tokens();
  // Each later request looks up prefix + 8 tokens and finds the prefix's blocks cached.
  EXPECT_EQ(queries, later * (prefix + 8.0));
  EXPECT_GE(hits / queries, prefix / (prefix + 8.0)) << hits << " of " << queries;
}

// A request placed on worker `target` (the ones before it held) is cancelled by its client
// there, and only there.
void ExpectCancelReaches(const ServingProcesses& serving, int target, int workers) {
  std::vector<std::thread> holders = HoldWorkers(serving, target, 60);
  int seen = 0;
  const StreamResult cancelled = RunGenerate(
      *serving.NewStub(), Ids(7, 8, 400), [&seen](const v1::GenerateResponse&,
                                                  grpc::ClientContext& context) {
        if (++seen == 3) context.TryCancel();
      });
  for (std::thread& t : holders) t.join();
  EXPECT_EQ(cancelled.status.error_code(), grpc::StatusCode::CANCELLED);
  const std::string m =
      AwaitSeries(serving.router_metrics_address(), Cancelled(target), 1);
  for (int w = 0; w < workers; ++w) {
    EXPECT_EQ(SeriesValue(m, Cancelled(w)), w == target ? 1 : 0) << "worker " << w;
  }
  ExpectEverythingReleased(serving);
}

class ThreeCpuWorkersTest : public ::testing::Test {
 protected:
  void SetUp() override { StartGroup(serving_, 2, {"--threads", "1"}); }
  ServingProcesses serving_;
};

TEST_F(ThreeCpuWorkersTest, SixtyFourConcurrentRequestsSpreadByLoad) {
  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < 64; ++i) requests.push_back(Ids(i, 8, 6));
  for (const StreamResult& r : RunConcurrently(serving_, requests)) {
    EXPECT_EQ(r.token_ids.size(), 6u);
  }
  const std::string m = AwaitFinishedTotal(serving_, 3, 64);
  for (int w = 0; w < 3; ++w) {
    // An even share is 21; the load rule must give each worker at least a good part of it.
    EXPECT_GE(FinishedOn(m, w), 12) << "worker " << w << "\n" << m;
  }
  ExpectEverythingReleased(serving_);
}

TEST_F(ThreeCpuWorkersTest, A512TokenSystemPromptFollowsTheWorkerThatCachesIt) {
  ExpectPrefixFollowsItsCache(serving_, 2, 512, 4);
}

TEST_F(ThreeCpuWorkersTest, CancelReachesTheThirdWorker) { ExpectCancelReaches(serving_, 2, 3); }

TEST_F(ThreeCpuWorkersTest, ALostWorkerFailsOnlyItsOwnRequests) {
  std::vector<StreamResult> results(9);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < results.size(); ++i) {
    clients.emplace_back([&, i] {
      results[i] = RunGenerate(*serving_.NewStub(), Ids(static_cast<int>(i), 8, 120));
    });
  }
  for (int i = 0; i < 300; ++i) {
    const std::string m = ScrapeMetrics(serving_.router_metrics_address());
    if (SeriesValue(m, Series("tessera_requests_running", 2)) >= 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  serving_.KillExtraWorker(1);  // worker 2
  for (std::thread& t : clients) t.join();
  int failed = 0;
  for (const StreamResult& r : results) {
    if (r.status.ok()) {
      EXPECT_EQ(r.token_ids.size(), 120u);
    } else {
      EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE) << r.status.error_message();
      ++failed;
    }
  }
  const std::string m = ScrapeMetrics(serving_.router_metrics_address());
  const std::string error = "tessera_requests_total{status=\"error\",worker=\"";
  EXPECT_GE(failed, 1) << "worker 2's requests were running when it was killed";
  EXPECT_EQ(SeriesValue(m, error + "2\"}"), failed) << m;
  EXPECT_EQ(SeriesValue(m, error + "0\"}"), 0) << m;
  EXPECT_EQ(SeriesValue(m, error + "1\"}"), 0) << m;
  EXPECT_EQ(FinishedOn(m, 0) + FinishedOn(m, 1), 9 - failed) << m;
}

#if TESSERA_E2E_WITH_EMULATED  // a build without the SIMT emulator has no --device emulated
// Two workers on the emulated cuda device (a tiny llama: 2 layers, hidden 128, head_dim 64), a
// 128-token shared prefix (the emulator is slow).
class TwoEmulatedWorkersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing_util::UniqueTempPath("data_parallel_tiny.gguf");
    ASSERT_TRUE(convert::WriteTinyLlamaGguf({.num_layers = 2, .hidden = 128, .num_heads = 2,
                                             .num_kv_heads = 1, .ffn = 256,
                                             .context_length = 512, .seed = 27},
                                            model_)
                    .ok());
    serving_.set_model(model_);
    StartGroup(serving_, 1,
               {"--device", "emulated", "--dtype", "f32", "--emulated-memory-mb", "512",
                "--max-num-seqs", "8", "--max-num-batched-tokens", "256"});
  }
  std::string model_;
  ServingProcesses serving_;
};

TEST_F(TwoEmulatedWorkersTest, LoadPrefixAndCancelRules) {
  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < 8; ++i) requests.push_back(Ids(i, 8, 4));
  for (const StreamResult& r : RunConcurrently(serving_, requests)) {
    EXPECT_EQ(r.token_ids.size(), 4u);
  }
  const std::string m = AwaitFinishedTotal(serving_, 2, 8);
  EXPECT_GE(FinishedOn(m, 0), 2) << m;
  EXPECT_GE(FinishedOn(m, 1), 2) << m;
  ExpectPrefixFollowsItsCache(serving_, 1, 128, 2);
  ExpectCancelReaches(serving_, 1, 2);
}
#endif

}  // namespace
}  // namespace tessera::e2e
