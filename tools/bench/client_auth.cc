#include "tools/bench/client_auth.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace tessera::bench {

std::string ApiKeyFromFlagOrEnvironment(const std::string& flag_key) {
  if (!flag_key.empty()) return flag_key;
  const char* key = std::getenv("TESSERA_API_KEY");
  return key != nullptr ? key : "";
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const ClientAuth& auth) {
  if (auth.tls_ca.empty()) return grpc::InsecureChannelCredentials();
  std::ifstream file(auth.tls_ca);
  std::stringstream pem;
  pem << file.rdbuf();
  if (!file || pem.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-ca: cannot read ", auth.tls_ca));
  }
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = pem.str();
  return grpc::SslCredentials(options);
}

void Authorize(grpc::ClientContext& context, const ClientAuth& auth) {
  if (!auth.api_key.empty()) context.AddMetadata("authorization", "Bearer " + auth.api_key);
}

}  // namespace tessera::bench
