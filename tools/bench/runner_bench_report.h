// tessera-runner-bench's results: the decode rows (batch x context) and prefill rows it measured
// or skipped, the bytes a decode step must move (the memory bound it is compared with), and how
// they are printed (a table on stdout) and saved (`--json FILE`, for validation reports).
//
// A decode step reads every weight matrix once (the q/k/v/o and gate/up/down projections of
// every layer, and the LM head; embedding rows, norms and biases are a rounding error) plus the
// K/V of every sequence's context: batch x context x layers x 2 x kv_heads x head_dim x the KV
// element size. Achieved GB/s is those bytes over the median step wall time, and its fraction
// of `--copy-bandwidth-gbs` (a device-to-device copy's measured bandwidth) says how close the
// whole step comes to the memory bound. Plain data; one thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/model/model_config.h"
#include "worker/model_runner.h"
#include "worker/models/host_model_weights.h"
#include "worker/models/weight_declaration.h"

namespace tessera::bench {

struct BenchSetup {
  std::string description;     // the runner: backend, device, dtype, graphs
  std::string model;           // the model file, or "dummy:<shape>"
  int64_t weights_bytes = 0;   // device backends: bytes of weights on the device
  int64_t kv_blocks = 0;       // the KV pool, including the null block
  int block_size = 0;
  int decode_steps = 0;        // timed decode steps per row
  int prefill_chunk = 0;       // prompt tokens per prefill step
  double copy_bandwidth_gbs = 0;  // 0 = not given
};

struct DecodeRow {
  int batch = 0;
  int context = 0;       // prompt tokens per sequence before the timed steps
  std::string skipped;   // why the row did not run; "" when it ran
  // Medians; device_ms < 0 when the backend has no device time (cpu).
  double step_ms = 0, hostproc_ms = 0, input_ms = 0, device_ms = 0;
  int replays = 0;       // timed steps that replayed a CUDA graph
  int64_t weight_bytes = 0;  // read per step
  int64_t kv_bytes = 0;      // read per step
};

struct PrefillRow {
  int tokens = 0;        // one sequence's prompt
  std::string skipped;
  int chunks = 0;        // steps the prompt took
  double ms = 0, device_ms = 0;  // medians over the timed runs; device_ms as DecodeRow's
};

// Bytes of the matrices one decode step reads on the cpu backend, as the loaded weights store
// them (quantized formats included); a device backend's: BuiltRunner::decode_weight_bytes.
int64_t DecodeWeightBytes(const worker::WeightDeclaration& declaration,
                          const worker::HostModelWeights& weights);
// K/V bytes of `batch` sequences of `context` tokens over the attention layers, plus their
// recurrent state (linear-attention layers), read and written once per decode step.
int64_t ContextKvBytes(const model::ModelConfig& config, const worker::ModelLayerInfo& layers,
                       int batch, int context, int element_bytes);

// Table lines on stdout, each row flushed as it is measured (long GPU runs show progress).
void PrintSetup(const BenchSetup& setup);
void PrintDecodeHeader();
void PrintDecodeRow(const BenchSetup& setup, const DecodeRow& row);
void PrintPrefillHeader();
void PrintPrefillRow(const PrefillRow& row);

// Writes {"setup": ..., "decode": [...], "prefill": [...]}; false (after printing why) when the
// file cannot be written.
bool WriteJson(const std::string& path, const BenchSetup& setup,
               const std::vector<DecodeRow>& decode, const std::vector<PrefillRow>& prefill);

}  // namespace tessera::bench
