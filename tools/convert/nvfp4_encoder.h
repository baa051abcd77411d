// Encodes f32 matrices in NVIDIA ModelOpt's NVFP4 layout (common/safetensors/modelopt_nvfp4.h
// describes it) for the tiny test models, the way ModelOpt quantizes: the global scale is
// amax / (6 × 448); each 16-element group of a row gets the E4M3 scale nearest to
// group_amax / (6 × global); each element the nearest E2M1 code of value / (scale × global).
// An independent implementation of the format (its own code tables) so that tests check the
// reader against it. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"

namespace tessera::convert {

struct Nvfp4Matrix {
  std::vector<uint8_t> codes;   // [rows, cols / 2]: element 2i low nibble, 2i + 1 high nibble
  std::vector<uint8_t> scales;  // [rows, cols / 16] E4M3
  float global_scale = 1.0f;
  // What the encoding stands for: (e2m1 × scale) × global_scale in f32, [rows, cols].
  std::vector<float> values;
};

// Precondition: values.size() == rows × cols, cols % 16 == 0 (checked).
Nvfp4Matrix EncodeNvfp4(std::span<const float> values, uint64_t rows, uint64_t cols);

// True for the GGUF tensors a ModelOpt NVFP4 export quantizes: the attention and feed-forward
// projection matrices (attn_q/k/v/output, ffn_gate/up/down .weight).
bool IsNvfp4Linear(std::string_view gguf_name);

// `file` with every IsNvfp4Linear tensor replaced by its NVFP4 encoding as llama.cpp's converter
// writes it (ggml NVFP4 blocks, K a multiple of 64, and the global scale as the F32 [1] tensor
// `<module>.scale`), everything else byte for byte: the GGUF twin of the NVFP4 HF export of
// `file`.
absl::StatusOr<std::vector<uint8_t>> SnapLinearsToNvfp4(const gguf::GgufFile& file);

}  // namespace tessera::convert
