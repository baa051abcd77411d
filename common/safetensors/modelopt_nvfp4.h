// NVIDIA ModelOpt NVFP4 checkpoints: hf_quant_config.json with quantization.quant_algo "NVFP4"
// (or config.json quantization_config with quant_method "modelopt" and the same quant_algo), and
// per quantized linear module M:
//   M.weight          U8 [N, K/2]      two E2M1 codes a byte: element 2i in the low nibble, 2i + 1
//                                      in the high nibble (sign bit 3, exponent 2..1, mantissa 0:
//                                      0, 0.5, 1, 1.5, 2, 3, 4, 6)
//   M.weight_scale    F8_E4M3 [N, K/16]  one scale per 16 consecutive elements of a row
//                                      (E4M3 "fn": bias 7, subnormals, 0x7F/0xFF NaN)
//   M.weight_scale_2  F32, one value   the per-tensor global scale
//   M.input_scale     F32              the activation scale (unused: activations stay unquantized)
// Modules left unquantized (exclude_modules) keep float weights, so the layout itself says which
// modules are quantized: a U8 weight with a weight_scale next to it.
//
// A quantized weight is presented as GGUF NVFP4 blocks plus the per-tensor scale, as llama.cpp's
// converter writes it (RepackModelOptNvfp4AsGguf; docs/design/fp4-formats.md), so every backend
// keeps it packed; the few that ggml's blocks cannot hold (K not a multiple of 64, a negative
// scale) are presented as F32 (DequantizeModelOptNvfp4). Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/safetensors/hf_directory.h"

namespace tessera::safetensors {

// True for a ModelOpt NVFP4 checkpoint, false for one without quantization config; UNIMPLEMENTED
// naming the method or algorithm for any other quantization, INVALID_ARGUMENT for a group_size
// other than 16.
absl::StatusOr<bool> IsModelOptNvfp4(const HfDirectory& dir);

// The companions of quantized weights (weight_scale, weight_scale_2, input_scale) and the KV-cache
// scales ModelOpt stores (k_scale, v_scale), which a weight's reader consumes or we do not use.
bool IsModelOptCompanionTensor(std::string_view name);

// The f32 values, row-major [N, K]: value = (e2m1(code) × e4m3(scale)) × scale_2, rounded once
// (the first product is exact in f32). INVALID_ARGUMENT naming the tensor for a dtype or shape
// other than the above, or a NaN scale.
absl::StatusOr<std::vector<float>> DequantizeModelOptNvfp4(const SafetensorsTensor& weight,
                                                           const SafetensorsTensor& weight_scale,
                                                           const SafetensorsTensor& weight_scale_2);

// A weight as ggml's NVFP4 (type 40): 64-element blocks of four UE4M3 sub-block scales and 32
// code bytes, [N, K] in GGUF order, and the tensor scale every product of the matrix is to be
// multiplied by (weight_scale_2; llama.cpp's `<name>.scale` sidecar). The blocks decode (ggml's
// doubled E2M1 × halved UE4M3) to exactly e2m1(code) × e4m3(weight_scale), the weight divided by
// the tensor scale.
struct GgufNvfp4Weight {
  std::vector<uint8_t> blocks;
  float tensor_scale = 1.0f;
};

// The weight as GgufNvfp4Weight; nullopt when ggml's blocks cannot hold it: K not a multiple of
// 64, or a scale byte with its sign bit set other than -0 (UE4M3 has no sign). The same errors as
// DequantizeModelOptNvfp4 for a bad layout or a NaN scale.
absl::StatusOr<std::optional<GgufNvfp4Weight>> RepackModelOptNvfp4AsGguf(
    const SafetensorsTensor& weight, const SafetensorsTensor& weight_scale,
    const SafetensorsTensor& weight_scale_2);

}  // namespace tessera::safetensors
