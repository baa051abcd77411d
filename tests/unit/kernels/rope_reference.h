// Reads tests/data/rope/rope_reference.json (tools/oracle/rope_reference.py): HF transformers'
// scaled-RoPE cos/sin (linear, YaRN, llama3 as rope_freqs) evaluated in float64, each case
// described the way a GGUF would describe it. Shared by the kernel and the runner tests.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace tessera::rope_reference {

inline constexpr char kRopeReferencePath[] = "tests/data/rope/rope_reference.json";

struct RopeReferenceCase {
  std::string name;
  int rope_dim = 0;
  double theta = 0.0;
  // The GGUF-side description (llama.cpp keys under {arch}.rope.scaling.*).
  std::string scaling_type;          // "none", "linear", "yarn"
  double factor = 1.0;
  int original_context_length = 0;   // 0 = absent
  double attn_factor = 1.0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  std::vector<float> rope_freqs;     // empty = no rope_freqs tensor
  std::vector<int32_t> positions;
  std::vector<std::vector<double>> cos_sin;  // [positions][rope_dim] (cos_0, sin_0, ...)
};

// |ours - HF| bound for one cos/sin value at position `pos`. Both sides carry f32 angle errors
// that grow with the angle: ours from ggml's incremental theta product (pair i's angle
// pos * s^i carries ~i roundings of s = powf(theta, -2 / rope_dim), so its error is ~i ulp of
// the angle, at most ~(max_i i * s^i) * pos * 6e-8 — about 1.7 * pos * 6e-8 for theta 1e6), HF's
// from rounding inv_freq to f32 (the oracle script's f64 port of ggml's formula differs from HF
// by up to 1.8e-3 for that reason alone). So the bound is a floor plus a slope per position.
// Measured 2026-11-22 on the 2-core Xeon (the table code is scalar: every ISA gives the same
// values; the test prints the measurements): max |diff| per case 1.45e-4 (linear_f2,
// pos <= 8191), 3.45e-4 (linear_f4, <= 16383), 3.54e-3 (yarn_f4, <= 40000), 2.78e-4 (yarn_f8,
// <= 16383), 2.30e-3 (llama3_f8, <= 32767); worst |diff| / pos at positions >= 64 1.32e-7
// (yarn_f4, pos 100, pair 3); below position 64 worst |diff| 7.8e-7. The bound leaves 2.3x on
// the slope and 2.5x on the floor.
inline double Tolerance(int32_t pos) { return 2e-6 + 3e-7 * pos; }

// Aborts the test binary (via json exceptions) if the file is malformed; a missing file gives an
// empty list, which the tests assert against.
inline std::vector<RopeReferenceCase> ReadRopeReference() {
  std::ifstream in(kRopeReferencePath);
  if (!in) return {};
  std::stringstream buffer;
  buffer << in.rdbuf();
  const nlohmann::json root = nlohmann::json::parse(buffer.str());
  std::vector<RopeReferenceCase> cases;
  for (const nlohmann::json& c : root.at("cases")) {
    const nlohmann::json& gguf = c.at("gguf");
    RopeReferenceCase r;
    r.name = c.at("name");
    r.rope_dim = c.at("rope_dim");
    r.theta = c.at("theta");
    r.scaling_type = gguf.at("type");
    r.factor = gguf.value("factor", 1.0);
    r.original_context_length = gguf.value("original_context_length", 0);
    r.attn_factor = gguf.value("attn_factor", 1.0);
    r.beta_fast = gguf.value("yarn_beta_fast", 32.0);
    r.beta_slow = gguf.value("yarn_beta_slow", 1.0);
    if (gguf.contains("rope_freqs")) {
      for (double f : gguf.at("rope_freqs")) r.rope_freqs.push_back(static_cast<float>(f));
    }
    for (int p : c.at("positions")) r.positions.push_back(p);
    for (const nlohmann::json& row : c.at("cos_sin")) {
      r.cos_sin.push_back(row.get<std::vector<double>>());
    }
    cases.push_back(std::move(r));
  }
  return cases;
}

}  // namespace tessera::rope_reference
