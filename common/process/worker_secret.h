// The router⇄worker shared secret of one run, for the processes that start a tessera-worker
// (`tessera serve`, tessera-localai): a fresh random value per start, handed to the worker in
// its environment (never on the command line, where any local user could read it with ps) and
// presented by the engine as `authorization: Bearer <secret>`.
//
// Threading: pure functions (std::random_device is per call).
#pragma once

#include <string>

namespace tessera::process {

// The environment variable tessera-worker and tessera-router read the secret from.
inline constexpr char kWorkerSecretEnv[] = "TESSERA_WORKER_SECRET";

// 128 random bits as hex.
std::string RandomSecret();

// "TESSERA_WORKER_SECRET=<secret>", an entry for ChildOptions::env.
std::string WorkerSecretEnvEntry(const std::string& secret);

}  // namespace tessera::process
