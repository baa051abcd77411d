// grpc::Status -> absl::Status for the CLI's client commands. The message starts with the code's
// name, so main's one error line reads "tessera: error: UNAVAILABLE: failed to connect ...".
#pragma once

#include <string>

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/util/grpc_status.h"

namespace tessera::cli {

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  const absl::Status converted = util::FromGrpcStatus(status);
  if (converted.ok()) return converted;
  return absl::Status(converted.code(), absl::StrCat(absl::StatusCodeToString(converted.code()),
                                                     ": ", converted.message()));
}

}  // namespace tessera::cli
