// Transformer hyper-parameters read from GGUF metadata (`{arch}.*` keys, llama.cpp naming).
// Plain data; produced once at load, then shared read-only.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"

namespace tessera::model {

struct ModelConfig {
  std::string architecture;       // general.architecture, e.g. "llama"
  std::string name;               // general.name ("" when absent)
  int num_layers = 0;             // {arch}.block_count
  int hidden_size = 0;            // {arch}.embedding_length
  int ffn_size = 0;               // {arch}.feed_forward_length
  int num_heads = 0;              // {arch}.attention.head_count
  int num_kv_heads = 0;           // {arch}.attention.head_count_kv (defaults to num_heads)
  int head_dim = 0;               // {arch}.attention.key_length, else hidden_size / num_heads
  int rope_dim = 0;               // {arch}.rope.dimension_count (defaults to head_dim)
  int context_length = 0;         // {arch}.context_length
  int vocab_size = 0;             // {arch}.vocab_size, else the tokenizer's token count
  double rope_theta = 10000.0;    // {arch}.rope.freq_base
  double rms_norm_eps = 1e-5;     // {arch}.attention.layer_norm_rms_epsilon
  bool tied_embeddings = false;   // no separate output.weight tensor
};

// INVALID_ARGUMENT naming the key when a required key is missing or a value is out of range
// (non-positive sizes, heads not dividing hidden, kv heads not dividing heads).
absl::StatusOr<ModelConfig> ReadModelConfig(const gguf::GgufFile& file);

}  // namespace tessera::model
