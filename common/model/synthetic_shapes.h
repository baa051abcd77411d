// Named shapes of real models for `--load-format dummy` (DESIGN.md §5: benchmarks at real sizes
// with random weights made on the device, like vLLM's dummy load format): each gives the
// ModelConfig a runner is built for, whether the attention projections carry q/k/v biases, and
// the BOS/EOS ids the worker reports in place of a tokenizer's.
//
// Plain data; a pure function of the name (any thread).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/model/model_config.h"

namespace tessera::model {

struct SyntheticModel {
  ModelConfig config;
  bool qkv_bias = false;   // attn_q/k/v carry a bias vector (Qwen2)
  int32_t bos_token_id = 0;  // in [0, config.vocab_size)
  int32_t eos_token_id = 0;  // in [0, config.vocab_size)
};

// The shape called `name` ("llama-3.1-8b", "qwen2.5-1.5b", "qwen3-next-80b-a3b-l12", "tiny",
// "tiny-hybrid"; the hybrids carry their HybridLayout in config.hybrid). `vocab_size` > 0 replaces
// the shape's vocabulary (to match a router's tokenizer); BOS/EOS ids it no longer holds become
// vocab_size - 2 and vocab_size - 1. INVALID_ARGUMENT listing the known names for an unknown
// one, or for a vocab_size override below 2.
absl::StatusOr<SyntheticModel> MakeSyntheticModel(std::string_view name, int vocab_size = 0);

// "llama-3.1-8b, qwen2.5-1.5b, ..." (for flag help and errors).
std::string SyntheticShapeNames();

}  // namespace tessera::model
