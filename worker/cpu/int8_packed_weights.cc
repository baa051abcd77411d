#include "worker/cpu/int8_packed_weights.h"

#include <sys/mman.h>

#include <span>

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

// Every matmul weight of the model, in a fixed order, with where its packed view goes.
template <typename Fn>
void ForEachMatmulWeight(const LlamaWeights& weights, std::vector<Int8LayerWeights>& layers,
                         cpu::Int8WeightView& output, Fn fn) {
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    const LlamaLayerWeights& w = weights.layers[l];
    Int8LayerWeights& p = layers[l];
    fn(w.wq, p.wq);
    fn(w.wk, p.wk);
    fn(w.wv, p.wv);
    fn(w.wo, p.wo);
    fn(w.w_gate, p.w_gate);
    fn(w.w_up, p.w_up);
    fn(w.w_down, p.w_down);
  }
  fn(weights.output, output);
}

}  // namespace

Int8PackedWeights::Int8PackedWeights(const LlamaWeights& weights) : layers_(weights.layers.size()) {
  size_t bytes = 0;
  ForEachMatmulWeight(weights, layers_, output_,
                      [&](const cpu::WeightView& w, auto&) { bytes += PackedBytes(w); });
  if (bytes == 0) return;
  absl::StatusOr<util::HugePageBuffer> memory = util::HugePageBuffer::Allocate(bytes);
  TESSERA_CHECK(memory.ok(), "Int8PackedWeights: cannot allocate memory for packed weights");
  memory_ = *std::move(memory);
  size_t offset = 0;
  ForEachMatmulWeight(
      weights, layers_, output_, [&](const cpu::WeightView& w, cpu::Int8WeightView& packed) {
        if (!Packable(w)) return;
        const size_t size = PackedBytes(w);
        packed = cpu::PackInt8Weights(w, std::span<uint8_t>(memory_.data() + offset, size));
        offset += size;
      });
  ::mprotect(memory_.data(), bytes, PROT_READ);  // immutable from here on
}

}  // namespace tessera::worker
