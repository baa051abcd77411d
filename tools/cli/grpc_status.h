// grpc::Status -> absl::Status for the CLI's client commands. The message starts with the code's
// name, so main's one error line reads "tessera: error: UNAVAILABLE: failed to connect ...".
#pragma once

#include <string>

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tessera::cli {

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  // gRPC's and absl's canonical codes share their numbering.
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  return absl::Status(code, absl::StrCat(absl::StatusCodeToString(code), ": ",
                                         status.error_message()));
}

}  // namespace tessera::cli
