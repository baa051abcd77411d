// How a backend holds a group of a model's weight tensors (one storage form): reported by the
// worker's Describe (DescribeResponse.weight_storage) and printed at start-up. Plain data.
#pragma once

#include <cstdint>
#include <string>

namespace tessera::worker {

struct WeightStorage {
  std::string format;      // "q4_1", "nvfp4", ... when packed; else the type held ("bf16")
  bool packed = false;     // kept quantized, multiplied by the packed-linear GEMMs
  int tensors = 0;
  int64_t parameters = 0;
  int64_t bytes = 0;       // bytes the backend holds for them, scales included

  double bytes_per_parameter() const {
    return parameters > 0 ? static_cast<double>(bytes) / static_cast<double>(parameters) : 0.0;
  }
};

}  // namespace tessera::worker
