// absl::Status <-> grpc::Status. The two share the canonical code numbering (OK = 0 ...
// UNAUTHENTICATED = 16), so a code converts by value and the message is carried over.
// Header-only: only code that links gRPC includes it.
#pragma once

#include <string>

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace tessera::util {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

}  // namespace tessera::util
