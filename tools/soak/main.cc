// tessera-soak: the soak/chaos run of issue 15 (usage: tools/soak/README.md).
//
// Phases: start `tessera serve` (gRPC, the OpenAI HTTP door and metrics on free ports); warm-up
// (plain requests, so allocator pools and gRPC buffers reach their working size) and the RSS
// baseline; the measured requests at the given concurrency with the behaviour mix (gRPC clients,
// and hostile HTTP clients: http_door.h), while a killer thread kill -9s the worker at evenly
// spaced points (after k*N/(kills+1) requests ended); then wait for the worker to be back and the
// server idle, read the end state and RSS, print the report, stop `tessera serve`. RSS is read
// from live processes only: the router over the whole run, and each worker life from its
// baseline (after its warm-up) to just before its kill or the end (rss_window.h).
//
// A client that gets UNAVAILABLE (the worker is gone) waits until ServerStats says a worker is
// connected again before its next request, as a client with retry backoff would; otherwise a
// restart of a few seconds would burn thousands of requests on instant refusals.
//
// Threading: the main thread owns the ServeTarget; `concurrency` client threads and the killer
// thread share the report (its own mutex) and an atomic request counter.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "tools/soak/http_door.h"
#include "tools/soak/serve_target.h"
#include "tools/soak/soak_options.h"
#include "tools/soak/soak_report.h"
#include "tools/soak/soak_request.h"

namespace tessera::soak {
namespace {

using Clock = std::chrono::steady_clock;

// Runs requests [0, count) on options.concurrency threads; each outcome goes to `report` (none
// for the warm-up).
void RunPhase(const ServeTarget& target, const SoakOptions& options, int count, bool warmup,
              SoakReport* report) {
  auto channel = grpc::CreateChannel(target.address(), grpc::InsecureChannelCredentials());
  std::atomic<int> next{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < options.concurrency; ++t) {
    clients.emplace_back([&] {
      auto stub = ::tessera::v1::Tessera::NewStub(channel);
      grpc::GenericStub generic(channel);
      for (int i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
        const SoakRequest plan = PlanSoakRequest(options, i, warmup);
        const Clock::time_point started = Clock::now();
        const SoakOutcome outcome =
            IsHttpBehaviour(plan.behaviour)
                ? RunHttpDoorRequest(plan, options, target.http_address())
                : RunSoakRequest(plan, options, *stub, generic);
        if (report != nullptr) report->Record(plan, outcome, started, Clock::now());
        if (outcome.code == grpc::StatusCode::UNAVAILABLE) target.WaitConnected(120);
      }
    });
  }
  for (std::thread& c : clients) c.join();
}

// Polls until nothing runs or waits and no block or slot is held (up to `timeout_s`).
void WaitIdle(const ServeTarget& target, double timeout_s) {
  const auto end = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1e3));
  while (Clock::now() < end) {
    const auto s = target.Stats();
    if (s.worker_connected() && s.requests_running() == 0 && s.requests_waiting() == 0 &&
        s.kv_blocks_used() == 0 && s.worker_active_slots() == 0) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// One life of the worker (from its start to its kill, or to the end): its RSS baseline, taken
// once it has served its warm-up, and the requests recorded by then.
struct WorkerLife {
  int number = 0;
  pid_t pid = -1;
  double start_mib = -1;
  int start_recorded = 0;
};

// The life's window, read now from the same live process (before any kill of it).
void CloseLife(const ServeTarget& target, const WorkerLife& life, SoakReport& report) {
  const pid_t now = target.WorkerPid();
  report.AddRssWindow({.who = absl::StrCat("worker life ", life.number),
                       .pid = life.pid,
                       .start_mib = life.start_mib,
                       .end_mib = now == life.pid ? RssMiB(now) : -1,
                       .requests = report.num_recorded() - life.start_recorded});
}

// Waits for `count` recorded requests (false when the run ended first).
bool AwaitRecorded(const SoakReport& report, int count, const std::atomic<bool>& done) {
  while (!done && report.num_recorded() < count) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return !done;
}

// A restarted worker's life: its baseline once it has served the warm-up's worth of requests
// (until then its pools are still growing to their working size); at the run's end without one,
// the baseline is the end and the window shows 0 requests (too short to tell: a failure).
WorkerLife BeginLife(const ServeTarget& target, const SoakOptions& options,
                     const SoakReport& report, const std::atomic<bool>& done, int number) {
  AwaitRecorded(report, report.num_recorded() + options.warmup_requests, done);
  const pid_t pid = target.WorkerPid();
  return {.number = number, .pid = pid, .start_mib = RssMiB(pid),
          .start_recorded = report.num_recorded()};
}

// Kills the worker options.kills times, evenly spread over the measured requests, closing each
// life's RSS window from the live worker just before its kill. `life`: the current life (the
// first on entry; the last on return, still open).
void Killer(const ServeTarget& target, const SoakOptions& options, SoakReport& report,
            const std::atomic<bool>& done, WorkerLife* life) {
  for (int k = 1; k <= options.kills; ++k) {
    const int at = static_cast<int>(int64_t{k} * options.num_requests / (options.kills + 1));
    if (!AwaitRecorded(report, at, done)) return;
    CloseLife(target, *life, report);
    report.BeginKill(target.WorkerPid());
    absl::StatusOr<pid_t> pid = target.KillWorker();
    if (!pid.ok()) {
      std::fprintf(stderr, "tessera-soak: kill %d: %s\n", k, pid.status().ToString().c_str());
      continue;
    }
    std::fprintf(stderr, "tessera-soak: kill -9 of tessera-worker %d after %d requests\n", *pid,
                 report.num_recorded());
    // Let the router notice before the next kill can be due.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    target.WaitConnected(120);
    report.EndKill();
    *life = BeginLife(target, options, report, done, k);
  }
}

EndState ReadEndState(ServeTarget& target) {
  EndState end;
  const auto s = target.Stats();
  end.worker_connected = s.worker_connected();
  end.running = s.requests_running();
  end.waiting = s.requests_waiting();
  end.kv_blocks_used = s.kv_blocks_used();
  end.worker_active_slots = s.worker_active_slots();
  end.preemptions = target.Metric("tessera_preemptions_total").value_or(-1);
  end.restores = target.Metric("tessera_worker_restores_total").value_or(-1);
  end.serve_alive = target.Alive();
  return end;
}

int Run(const SoakOptions& options) {
  ServeTarget target;
  if (absl::Status s = target.Start(options.tessera_path, options.serve_args); !s.ok()) {
    std::fprintf(stderr, "tessera-soak: %s\n", s.ToString().c_str());
    return 2;
  }
  std::fprintf(stderr, "tessera-soak: tessera serve on %s (router %d, worker %d)\n",
               target.address().c_str(), target.RouterPid(), target.WorkerPid());
  RunPhase(target, options, options.warmup_requests, /*warmup=*/true, nullptr);
  WaitIdle(target, 60);
  const pid_t router = target.RouterPid();
  const double router_start_mib = RssMiB(router);
  WorkerLife life{.pid = target.WorkerPid(), .start_mib = RssMiB(target.WorkerPid())};

  SoakReport report(options);
  std::atomic<bool> done{false};
  const Clock::time_point start = Clock::now();
  std::thread killer([&] { Killer(target, options, report, done, &life); });
  RunPhase(target, options, options.num_requests, /*warmup=*/false, &report);
  done = true;
  killer.join();
  report.set_duration_s(std::chrono::duration<double>(Clock::now() - start).count());

  target.WaitConnected(120);
  report.EndKill();  // a kill whose restore the killer did not wait out
  WaitIdle(target, 60);
  CloseLife(target, life, report);
  report.AddRssWindow({.who = "router", .pid = router, .start_mib = router_start_mib,
                       .end_mib = RssMiB(router), .requests = report.num_recorded()});
  report.set_end_state(ReadEndState(target));
  report.Print(stdout);
  std::fflush(stdout);
  const std::string stopped = target.Stop();
  std::fprintf(stderr, "tessera-soak: tessera serve stopped (%s)\n", stopped.c_str());
  return report.Failures().empty() ? 0 : 1;
}

}  // namespace
}  // namespace tessera::soak

int main(int argc, char** argv) {
  absl::StatusOr<tessera::soak::SoakOptions> options = tessera::soak::ParseSoakOptions(argc, argv);
  if (!options.ok()) {
    if (absl::IsCancelled(options.status())) return 0;  // --help
    std::fprintf(stderr, "tessera-soak: %s\n", options.status().ToString().c_str());
    return 2;
  }
  return tessera::soak::Run(*options);
}
