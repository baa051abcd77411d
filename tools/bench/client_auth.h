// How the command-line clients (`tessera generate --addr`, `tessera bench`) reach a router that
// requires an API key (--api-key) or serves TLS (--tls-cert): the key is sent as
// `authorization: Bearer KEY` on every gRPC call and HTTP request, and with a CA file the gRPC
// channel and the HTTP client speak TLS and trust that CA (e.g. the router's self-signed
// certificate). Library `tessera_client_auth`. Plain data and pure helpers; any thread.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"

namespace tessera::bench {

struct ClientAuth {
  std::string api_key;  // "" = none
  std::string tls_ca;   // PEM file of the CA to trust; "" = plaintext
};

// `flag_key` when set, else $TESSERA_API_KEY (the server's variable too), else none.
std::string ApiKeyFromFlagOrEnvironment(const std::string& flag_key);

// Insecure credentials, or TLS trusting `auth.tls_ca` (INVALID_ARGUMENT naming an unreadable
// file).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const ClientAuth& auth);

// Adds the authorization metadata to a call's context (nothing without a key).
void Authorize(grpc::ClientContext& context, const ClientAuth& auth);

}  // namespace tessera::bench
