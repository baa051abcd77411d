#include "worker/cpu/int8_packed_weights.h"

#include <sys/mman.h>

#include <span>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/util/absl_compat.h"
#include "common/util/check.h"

namespace tessera::worker {
namespace {

namespace cpu = kernels::cpu;

bool Packable(const cpu::WeightView& w) {
  return cpu::Int8MatmulSupportsFormat(w.format) && w.cols % cpu::kQuantBlockSize == 0;
}

size_t PackedBytes(const cpu::WeightView& w) {
  return Packable(w) ? cpu::PackedInt8Bytes(w.format, w.rows, w.cols) : 0;
}

// Every matmul weight of the model, in a fixed order, with its GGUF-style name and where its
// packed view goes: fn(name, weight, packed view).
template <typename Fn>
void ForEachMatmulWeight(const LlamaWeights& weights, std::vector<Int8LayerWeights>& layers,
                         cpu::Int8WeightView& output, Fn fn) {
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    const LlamaLayerWeights& w = weights.layers[l];
    Int8LayerWeights& p = layers[l];
    const std::string blk = absl::StrCat("blk.", l, ".");
    fn(blk + "attn_q", w.wq, p.wq);
    fn(blk + "attn_k", w.wk, p.wk);
    fn(blk + "attn_v", w.wv, p.wv);
    fn(blk + "attn_output", w.wo, p.wo);
    fn(blk + "ffn_gate", w.w_gate, p.w_gate);
    fn(blk + "ffn_up", w.w_up, p.w_up);
    fn(blk + "ffn_down", w.w_down, p.w_down);
  }
  fn(std::string("output"), weights.output, output);
}

}  // namespace

std::vector<std::string> UnpackableInt8Weights(const LlamaWeights& weights) {
  std::vector<Int8LayerWeights> layers(weights.layers.size());
  cpu::Int8WeightView output;
  std::vector<std::string> names;
  ForEachMatmulWeight(weights, layers, output,
                      [&](const std::string& name, const cpu::WeightView& w, auto&) {
                        if (Packable(w)) return;
                        const auto format = util::ToAbsl(cpu::WeightFormatName(w.format));
                        names.push_back(absl::StrCat(name, " (", format, ", ", w.cols, " cols)"));
                      });
  return names;
}

absl::Status CheckInt8Packable(const LlamaWeights& weights) {
  const std::vector<std::string> unpackable = UnpackableInt8Weights(weights);
  if (unpackable.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "int8 activations need every matmul weight in Q8_0, Q4_0 or Q4_1 with a multiple of 32 "
      "columns; this model has ", unpackable.size(), " that are not: ",
      absl::StrJoin(unpackable, ", ")));
}

Int8PackedWeights::Int8PackedWeights(const LlamaWeights& weights) : layers_(weights.layers.size()) {
  const absl::Status packable = CheckInt8Packable(weights);
  TESSERA_CHECK(packable.ok(), std::string(packable.message()).c_str());
  size_t bytes = 0;
  ForEachMatmulWeight(weights, layers_, output_, [&](const std::string&, const cpu::WeightView& w,
                                                     auto&) { bytes += PackedBytes(w); });
  if (bytes == 0) return;
  absl::StatusOr<util::HugePageBuffer> memory = util::HugePageBuffer::Allocate(bytes);
  TESSERA_CHECK(memory.ok(), "Int8PackedWeights: cannot allocate memory for packed weights");
  memory_ = *std::move(memory);
  size_t offset = 0;
  ForEachMatmulWeight(
      weights, layers_, output_,
      [&](const std::string&, const cpu::WeightView& w, cpu::Int8WeightView& packed) {
        const size_t size = PackedBytes(w);
        packed = cpu::PackInt8Weights(w, std::span<uint8_t>(memory_.data() + offset, size));
        offset += size;
        ++packed_count_;
      });
  ::mprotect(memory_.data(), bytes, PROT_READ);  // immutable from here on
}

}  // namespace tessera::worker
