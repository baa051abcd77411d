// tessera-localai: a LocalAI external gRPC backend (proto/localai/backend.proto) serving
// tessera. LocalAI starts it as `tessera-localai --addr 127.0.0.1:PORT` (also `--addr=...`),
// polls Health, then calls LoadModel; see backend_service.h for every RPC.
//
// LOCALAI_GRPC_AUTH_TOKEN (read here, once): when set, every call must carry metadata
// `authorization: Bearer <token>`. TESSERA_WORKER_SECRET: the secret of a --worker attached to
// (a worker this process starts gets a fresh random one instead).
//
// Prints "tessera-localai listening on HOST:PORT" once serving. SIGINT/SIGTERM: stop serving,
// stop the engine and the worker this process started, exit 0.
//
// Threading: the main thread blocks SIGINT/SIGTERM before any thread starts, then runs the
// OwnerThread's tasks (spawning and reaping the worker) and waits for the signal; gRPC's sync
// server threads run the handlers.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "router/localai/backend_service.h"
#include "router/localai/owner_thread.h"

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "tessera-localai: error: %s\n", message.c_str());
  return 1;
}

std::string BinaryDir() {
  std::error_code error;
  return std::filesystem::read_symlink("/proc/self/exe", error).parent_path().string();
}

}  // namespace

int main(int argc, char** argv) {
  std::string addr;
  std::string bin_dir;
  tessera::router::localai::BackendOptions options;
  CLI::App app{"tessera-localai: a LocalAI gRPC backend serving tessera"};
  app.add_option("--addr", addr, "HOST:PORT to serve LocalAI's backend.Backend on")->required();
  app.add_option("--worker", options.worker_address,
                 "attach to this running tessera-worker instead of starting one");
  app.add_option("--bin-dir", bin_dir, "where tessera-worker is (default: next to this binary)");
  app.add_option("--kv-cache-mb", options.kv_cache_mb, "the started worker's KV pool (MiB)");
  app.add_option("--max-num-seqs", options.max_num_seqs, "sequences batched per step");
  app.add_option("--workers", options.workers,
                 "tessera-workers started per loaded model, one engine each behind the "
                 "router's data-parallel routing (not with --worker)")
      ->capture_default_str();
  app.add_option("--load-timeout-s", options.load_timeout_s, "LoadModel's limit")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    return Fail(e.what());
  }
  if (options.workers < 1) return Fail("--workers must be >= 1");
  if (options.workers > 1 && !options.worker_address.empty()) {
    return Fail("--workers starts workers; --worker attaches to one: not both");
  }
  if (const char* token = std::getenv("LOCALAI_GRPC_AUTH_TOKEN"); token != nullptr) {
    options.auth_token = token;
  }
  if (const char* secret = std::getenv("TESSERA_WORKER_SECRET"); secret != nullptr) {
    options.worker_secret = secret;  // the environment keeps it off the command line (ps)
  }
  options.worker_binary =
      (std::filesystem::path(bin_dir.empty() ? BinaryDir() : bin_dir) / "tessera-worker").string();

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread starts

  tessera::router::localai::OwnerThread owner;
  tessera::router::localai::BackendService service(options, &owner);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(addr, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) return Fail("cannot listen on " + addr);
  std::printf("tessera-localai listening on %s:%d\n", addr.substr(0, addr.rfind(':')).c_str(),
              port);
  std::fflush(stdout);

  const timespec no_wait{0, 0};
  while (sigtimedwait(&signals, nullptr, &no_wait) < 0) owner.RunPending(absl::Milliseconds(100));
  std::fprintf(stderr, "tessera-localai: stopping\n");
  // Shutdown waits for the handlers; a LoadModel in flight may need the owner thread meanwhile.
  std::atomic<bool> stopped{false};
  std::thread stopper([&server, &stopped] {
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    stopped.store(true);
  });
  while (!stopped.load()) owner.RunPending(absl::Milliseconds(50));
  stopper.join();
  service.Unload();
  return 0;
}
