// Whether a Launcher's status (launch_shape.h) reports success, for launch functions that chain
// several kernels and must stop at the first failed launch: absl::Status (emulated) has ok(),
// cudaError_t (CUDA) is an enum whose zero value is cudaSuccess.
#pragma once

namespace tessera::cuda {

template <class Status>
bool LaunchSucceeded(const Status& status) {
  if constexpr (requires { status.ok(); }) {
    return status.ok();
  } else {
    return status == Status{};
  }
}

}  // namespace tessera::cuda
