#include "tools/bench/runner_bench_report.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "kernels/cpu/weight_format.h"
#include "nlohmann/json.hpp"

namespace tessera::bench {
namespace {

constexpr double kMB = 1e6;
constexpr double kGB = 1e9;

int64_t ViewBytes(const kernels::cpu::WeightView& view) {
  return static_cast<int64_t>(kernels::cpu::RowBytes(view.format, view.cols)) * view.rows;
}

// The device time as JSON: null without one.
nlohmann::json DeviceMs(double ms) { return ms < 0 ? nlohmann::json(nullptr) : nlohmann::json(ms); }

// "%.3f", or "-" without a device time.
std::string DeviceMsText(double ms) {
  char text[32] = "-";
  if (ms >= 0) std::snprintf(text, sizeof(text), "%.3f", ms);
  return text;
}

// Achieved GB/s of a decode row (0 when it did not run).
double Gbs(const DecodeRow& r) {
  if (!r.skipped.empty() || r.step_ms <= 0) return 0;
  return static_cast<double>(r.weight_bytes + r.kv_bytes) / (r.step_ms * 1e-3) / kGB;
}

nlohmann::json DecodeJson(const BenchSetup& setup, const DecodeRow& r) {
  nlohmann::json row{{"batch", r.batch}, {"context", r.context}};
  if (!r.skipped.empty()) {
    row["skipped"] = r.skipped;
    return row;
  }
  row.update({{"steps", setup.decode_steps},
              {"step_ms", r.step_ms},
              {"device_ms", DeviceMs(r.device_ms)},
              {"hostproc_ms", r.hostproc_ms},
              {"input_ms", r.input_ms},
              {"graph_replays", r.replays},
              {"weight_bytes", r.weight_bytes},
              {"kv_bytes", r.kv_bytes},
              {"bytes_per_step", r.weight_bytes + r.kv_bytes},
              {"gbs", Gbs(r)}});
  if (setup.copy_bandwidth_gbs > 0) row["copy_fraction"] = Gbs(r) / setup.copy_bandwidth_gbs;
  return row;
}

nlohmann::json PrefillJson(const BenchSetup& setup, const PrefillRow& r) {
  nlohmann::json row{{"tokens", r.tokens}};
  if (!r.skipped.empty()) {
    row["skipped"] = r.skipped;
    return row;
  }
  row.update({{"chunk", setup.prefill_chunk},
              {"chunks", r.chunks},
              {"ms", r.ms},
              {"device_ms", DeviceMs(r.device_ms)},
              {"tokens_per_s", r.tokens / (r.ms * 1e-3)}});
  return row;
}

}  // namespace

int64_t DecodeWeightBytes(const worker::WeightDeclaration& declaration,
                          const worker::HostModelWeights& weights) {
  int64_t bytes = 0;
  for (worker::WeightId id = 0; id < declaration.size(); ++id) {
    if (weights[id].present && weights[id].role == worker::WeightRole::kMatrix) {
      bytes += ViewBytes(weights[id].matrix);
    }
  }
  return bytes;
}

int64_t ContextKvBytes(const model::ModelConfig& c, const worker::ModelLayerInfo& layers,
                       int batch, int context, int element_bytes) {
  const int64_t kv = int64_t{batch} * context * layers.attention_layers * 2 * c.num_kv_heads *
                     c.head_dim * element_bytes;
  return kv + int64_t{batch} * 2 * layers.state_bytes_per_sequence;  // state read and written
}

void PrintSetup(const BenchSetup& s) {
  std::printf("# %s\n# model %s", s.description.c_str(), s.model.c_str());
  if (s.weights_bytes > 0) {
    std::printf(", %.1f MB of weights on the device", static_cast<double>(s.weights_bytes) / kMB);
  }
  std::printf("; KV pool %lld blocks of %d; %d decode steps per row; prefill chunks of %d "
              "tokens\n",
              static_cast<long long>(s.kv_blocks), s.block_size, s.decode_steps,
              s.prefill_chunk);
}

void PrintDecodeHeader() {
  std::printf("%6s %8s %10s %10s %12s %9s %8s %10s %8s %8s\n", "batch", "context", "step_ms",
              "device_ms", "hostproc_ms", "input_ms", "replays", "MB/step", "GB/s", "of_copy");
}

void PrintDecodeRow(const BenchSetup& setup, const DecodeRow& r) {
  if (!r.skipped.empty()) {
    std::printf("%6d %8d   skipped: %s\n", r.batch, r.context, r.skipped.c_str());
  } else {
    char fraction[16] = "-";
    if (setup.copy_bandwidth_gbs > 0) {
      std::snprintf(fraction, sizeof(fraction), "%.2f", Gbs(r) / setup.copy_bandwidth_gbs);
    }
    std::printf("%6d %8d %10.3f %10s %12.3f %9.3f %8d %10.2f %8.1f %8s\n", r.batch, r.context,
                r.step_ms, DeviceMsText(r.device_ms).c_str(), r.hostproc_ms, r.input_ms, r.replays,
                static_cast<double>(r.weight_bytes + r.kv_bytes) / kMB, Gbs(r), fraction);
  }
  std::fflush(stdout);
}

void PrintPrefillHeader() {
  std::printf("%8s %7s %10s %10s %10s\n", "prefill", "chunks", "ms", "device_ms", "tokens/s");
}

void PrintPrefillRow(const PrefillRow& r) {
  if (!r.skipped.empty()) {
    std::printf("%8d   skipped: %s\n", r.tokens, r.skipped.c_str());
  } else {
    std::printf("%8d %7d %10.3f %10s %10.1f\n", r.tokens, r.chunks, r.ms,
                DeviceMsText(r.device_ms).c_str(), r.tokens / (r.ms * 1e-3));
  }
  std::fflush(stdout);
}

bool WriteJson(const std::string& path, const BenchSetup& setup,
               const std::vector<DecodeRow>& decode, const std::vector<PrefillRow>& prefill) {
  nlohmann::json out{{"setup",
                      {{"description", setup.description},
                       {"model", setup.model},
                       {"weights_bytes", setup.weights_bytes},
                       {"kv_blocks", setup.kv_blocks},
                       {"block_size", setup.block_size},
                       {"decode_steps", setup.decode_steps},
                       {"prefill_chunk", setup.prefill_chunk}}},
                     {"decode", nlohmann::json::array()},
                     {"prefill", nlohmann::json::array()}};
  if (setup.copy_bandwidth_gbs > 0) out["setup"]["copy_bandwidth_gbs"] = setup.copy_bandwidth_gbs;
  for (const DecodeRow& r : decode) out["decode"].push_back(DecodeJson(setup, r));
  for (const PrefillRow& r : prefill) out["prefill"].push_back(PrefillJson(setup, r));
  std::ofstream file(path);
  file << out.dump(2) << "\n";
  if (!file) {
    std::fprintf(stderr, "error: cannot write --json %s\n", path.c_str());
    return false;
  }
  return true;
}

}  // namespace tessera::bench
