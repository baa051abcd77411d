// Which kernels opted in to more than CUDA's default 48 KiB of shared memory per block, as
// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) records it
// on a GPU: the emulated launchers keep one and give each launch its kernel's limit
// (LaunchConfig::shared_bytes_limit), so a kernel that forgot to opt in fails here as it would
// on hardware. Thread-compatible; owned by its launcher.
#pragma once

#include <cstddef>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/simt/emulator.h"

namespace tessera::simt {

class SharedMemoryOptIns {
 public:
  absl::Status Allow(const void* kernel, size_t dynamic_bytes) {
    if (dynamic_bytes > kMaxSharedBytesPerBlock) {
      return absl::ResourceExhaustedError(absl::StrCat(
          dynamic_bytes, " bytes of dynamic shared memory exceed the emulated device's ",
          kMaxSharedBytesPerBlock, " per block"));
    }
    if (dynamic_bytes > kDefaultSharedBytesPerBlock) limits_[kernel] = kMaxSharedBytesPerBlock;
    return absl::OkStatus();
  }

  // The static + dynamic shared memory a launch of `kernel` may use.
  size_t LimitFor(const void* kernel) const {
    auto it = limits_.find(kernel);
    return it == limits_.end() ? kDefaultSharedBytesPerBlock : it->second;
  }

 private:
  std::unordered_map<const void*, size_t> limits_;
};

}  // namespace tessera::simt
