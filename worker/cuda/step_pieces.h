// Piecewise CUDA graphs for steps with prefill rows (docs/design/piecewise-graphs.md): a step's
// work is token-shaped (embedding, norms, GEMMs, RoPE + KV write, activations, MoE: its launch
// shapes depend only on the step's token count, and it reads only the token-indexed step inputs)
// except for the sequence-shaped ops (paged attention, the recurrent mixer, and the head from the
// gather of the sampling rows on), whose grids and arguments depend on the step's sequences. A
// step padded to a token bucket is captured as one graph per stretch of token-shaped work between
// sequence-shaped ops; a replay re-runs the model definition with the token-shaped ops skipped,
// replaying each stretch's graph where the stretch ends and enqueuing the sequence-shaped op
// after it, eagerly, with the step's own shapes.
//
// The model ops (device_model_ops.h) ask TokenWork() before each token-shaped launch and call
// SequenceWork() before each sequence-shaped op; the graph cache (graph_cache.h) sets the mode for
// each pass over the model:
//
//   mode      token-shaped ops       sequence-shaped ops          after the tail
//   kWhole    enqueued               enqueued                     enqueued
//   kWarmUp   enqueued               skipped                      skipped
//   kCapture  captured, one graph    skipped (a capture ends,     skipped (no capture open)
//             per stretch             the next begins)
//   kReplay   skipped (in graphs)    enqueued after the graph     enqueued
//                                    of the stretch before them
//
// The tail is the first sequence-shaped op flagged as such (the gather of the sampling rows): from
// it on everything is eager, so a replay's head and sampling see the step's own row count.
//
// Owned by the runner; lent to its model ops and graph cache. Step thread only.
#pragma once

#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/device/device_runtime.h"

namespace tessera::worker {

class StepPieces {
 public:
  enum class Mode { kWhole, kWarmUp, kCapture, kReplay };

  // Precondition: runtime outlives this.
  explicit StepPieces(device::DeviceRuntime* runtime);

  // Starts a pass over the model in `mode`: kCapture opens the first capture; kReplay replays
  // `graphs` (what the kCapture pass over the same bucket returned), one per stretch.
  absl::Status Begin(Mode mode, std::span<const device::GraphHandle> graphs = {});
  // Whether a token-shaped op enqueues its launches now.
  bool TokenWork() const;
  // Before a sequence-shaped op (`tail`: the first op of the head, after which all work is
  // eager): ends the stretch before it (kCapture: closes its capture and, unless `tail`, opens the
  // next; kReplay: replays its graph). Returns whether the op enqueues its launches now.
  absl::StatusOr<bool> SequenceWork(bool tail);
  // Ends the pass and returns to kWhole. kCapture: closes a capture still open and returns the
  // stretches' graphs in order; kReplay: every graph must have been replayed (the runner's work
  // after the model, sampling, reads what the tail wrote).
  absl::StatusOr<std::vector<device::GraphHandle>> Finish();

  Mode mode() const { return mode_; }

 private:
  device::DeviceRuntime* runtime_;
  Mode mode_ = Mode::kWhole;
  bool after_tail_ = false;
  bool capture_open_ = false;
  std::vector<device::GraphHandle> captured_;
  std::vector<device::GraphHandle> replaying_;
  size_t next_ = 0;  // kReplay: the next graph to replay
};

}  // namespace tessera::worker
