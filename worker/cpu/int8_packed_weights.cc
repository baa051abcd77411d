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

// Anonymous memory whose start is 2 MiB aligned, advised MADV_HUGEPAGE (a decode step streams
// every packed weight; with 4 KiB pages that is a TLB miss per page).
uint8_t* HugePageMemory(size_t bytes) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t length = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* raw = ::mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  TESSERA_CHECK(raw != MAP_FAILED, "Int8PackedWeights: cannot allocate memory for packed weights");
  const auto begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (begin + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > begin) ::munmap(raw, aligned - begin);
  const uintptr_t end = begin + length + kHugePage;
  if (end > aligned + length)
    ::munmap(reinterpret_cast<void*>(aligned + length), end - aligned - length);
  ::madvise(reinterpret_cast<void*>(aligned), length, MADV_HUGEPAGE);  // advisory
  return reinterpret_cast<uint8_t*>(aligned);
}

}  // namespace

Int8PackedWeights::Int8PackedWeights(const LlamaWeights& weights) : layers_(weights.layers.size()) {
  ForEachMatmulWeight(weights, layers_, output_,
                      [this](const cpu::WeightView& w, auto&) { bytes_ += PackedBytes(w); });
  if (bytes_ == 0) return;
  memory_ = HugePageMemory(bytes_);
  size_t offset = 0;
  ForEachMatmulWeight(
      weights, layers_, output_, [&](const cpu::WeightView& w, cpu::Int8WeightView& packed) {
        if (!Packable(w)) return;
        const size_t size = PackedBytes(w);
        packed = cpu::PackInt8Weights(w, std::span<uint8_t>(memory_ + offset, size));
        offset += size;
      });
  ::mprotect(memory_, bytes_, PROT_READ);
}

Int8PackedWeights::~Int8PackedWeights() {
  if (memory_ != nullptr) ::munmap(memory_, bytes_);
}

}  // namespace tessera::worker
