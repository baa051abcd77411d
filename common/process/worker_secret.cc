#include "common/process/worker_secret.h"

#include <random>

#include "absl/strings/str_cat.h"

namespace tessera::process {

std::string RandomSecret() {
  std::random_device random;
  std::string secret;
  for (int i = 0; i < 4; ++i) absl::StrAppend(&secret, absl::Hex(random(), absl::kZeroPad8));
  return secret;
}

std::string WorkerSecretEnvEntry(const std::string& secret) {
  return absl::StrCat(kWorkerSecretEnv, "=", secret);
}

}  // namespace tessera::process
