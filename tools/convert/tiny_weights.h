// The random weights of the generated tiny models (tiny_model.h: llama; tiny_hybrid_model.h:
// qwen35 / qwen35moe / qwen3next): a plan per tensor (name, ggml dims, storage type, how its
// values are drawn), drawn and encoded into a GgufWriter.
//
// Deterministic on every platform: each tensor draws from its own std::mt19937_64 (whose output
// the standard fixes) seeded by the model seed and the tensor's name, through transforms that use
// only exact IEEE arithmetic (no std::normal_distribution, no libm), so a tensor's values do not
// depend on which other tensors exist or on the C++ library.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/gguf/ggml_type.h"
#include "common/gguf/gguf_writer.h"

namespace tessera::convert {

// Q8_0 / Q4_1 block size: a quantized tensor's rows (dims[0]) must be whole blocks.
inline constexpr int kTinyQuantBlock = 32;

// Uniform and approximately normal draws from std::mt19937_64.
class TinyRandomStream {
 public:
  explicit TinyRandomStream(uint64_t seed) : engine_(seed) {}
  // U[0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // N(0, 1) approximated by the sum of 12 uniforms minus 6 (range [-6, 6]).
  float Normal() {
    double sum = 0.0;
    for (int i = 0; i < 12; ++i) sum += Uniform();
    return static_cast<float>(sum - 6.0);
  }

 private:
  std::mt19937_64 engine_;
};

// The stream seed of tensor `name` in a model generated with `seed` (FNV-1a of the name mixed
// into the seed by splitmix64's finalizer).
uint64_t TinyTensorSeed(uint64_t seed, std::string_view name);

// exp(x) from its Taylor series in double arithmetic (+, *, / only), for |x| <= 4: the same bits
// on every platform, unlike libm's exp. Precondition: |x| <= 4 (checked).
double PortableExp(double x);

// How a tensor's values are drawn.
struct TinyInit {
  enum class Kind {
    kNormal,         // a + b * N(0, 1), computed in float
    kUniform,        // U[a, b)
    kNegExpUniform,  // -exp(U[a, b)): ssm_a = -exp(A_log) with A_log ~ U[a, b)
  };
  Kind kind = Kind::kNormal;
  float a = 0.0f;
  float b = 0.0f;

  static TinyInit Normal(float mean, float stddev) { return {Kind::kNormal, mean, stddev}; }
  static TinyInit Uniform(float low, float high) { return {Kind::kUniform, low, high}; }
  static TinyInit NegExpOfUniform(float low, float high) {
    return {Kind::kNegExpUniform, low, high};
  }
};

struct TinyTensorPlan {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the contiguous row
  gguf::GgmlType type;
  TinyInit init;
};

uint64_t TinyNumElements(const TinyTensorPlan& plan);

// The tensor's values before encoding (its own stream: TinyTensorSeed(seed, plan.name)).
std::vector<float> DrawTinyTensorValues(const TinyTensorPlan& plan, uint64_t seed);

// Draws the values, encodes them as plan.type and adds the tensor to `writer`. INTERNAL naming
// the tensor when the encoding fails (e.g. a quantized row that is not whole blocks).
absl::Status AddTinyTensor(const TinyTensorPlan& plan, uint64_t seed, gguf::GgufWriter* writer);

}  // namespace tessera::convert
