// Why a step did not replay a captured CUDA graph (whole, or piecewise for a step with prefill
// rows). Reported by a device runner's graph cache (worker/cuda/graph_cache.h) and counted in
// tessera_graph_misses_total{reason}.
#pragma once

#include <cstddef>
#include <string_view>

namespace tessera::worker {

enum class GraphMissReason {
  kEager,     // the runner ran it eagerly (e.g. its bucket is not captured yet)
  kOversize,  // more sequences than the largest captured bucket
  kDisabled,  // graphs are off for this worker
};
inline constexpr size_t kNumGraphMissReasons = 3;

// "eager", "oversize", "disabled"
inline std::string_view GraphMissReasonLabel(GraphMissReason reason) {
  switch (reason) {
    case GraphMissReason::kEager: return "eager";
    case GraphMissReason::kOversize: return "oversize";
    case GraphMissReason::kDisabled: return "disabled";
  }
  return "eager";
}

}  // namespace tessera::worker
