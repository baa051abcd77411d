// Matmul with activations quantized to int8 ("q8 activations"): y[m, n] ≈ x[m, k] · w[n, k]ᵀ
// for Q8_0 / Q4_0 / Q4_1 weights, with integer dot products (AVX-512 VNNI where the CPU has it,
// AVX2 vpmaddubsw otherwise).
//
// A LOSSY path, opt-in (DESIGN.md §6 "lossy paths"; its KL bound is in docs/perf/cpu.md). The
// exact path is matmul.h. Why it exists: with f32 activations every weight costs one f32 FMA per
// token, so a decode batch is bound by the FMA units; int8 dot products do 64 multiply-adds per
// instruction and make batched decode bound by memory again (docs/perf/cpu.md).
//
// Numerics (the contract; every ISA and every m gives the same bits, so batch invariance holds):
//  1. Each row of x is quantized in blocks of 32: amax = max |x_j|, dx = amax / 127,
//     q_j = nearbyint(x_j * (127 / amax)) (0 when amax == 0), xsum = Σ q_j.
//  2. Each weight block is read as unsigned codes u_j with an offset o and scale d (f16 -> f32):
//     Q4_1: u = nibble, o = 0, plus the block's min mw;  Q4_0: u = nibble, o = 8;
//     Q8_0: u = q + 128, o = 128.  Integer part: isum = Σ u_j q_j − o · xsum (exact int32).
//  3. y[i, c] = fold over the blocks b in order, starting from acc = 0:
//       acc = fma(d_w * dx, float(isum), acc);  then for Q4_1: acc = fma(mw, dx * float(xsum), acc)
//     (each product a single float multiply).
//
// Weights are repacked once (PackInt8Weights) so that 16 output rows share a vector: lane c of a
// vector holds 4 consecutive k-codes of row c, one VNNI instruction multiplies them with 4
// broadcast activation bytes, and the per-block scales are applied to 16 outputs at once.
// Threading: the caller's thread drives `pool` (thread_pool.h); packed weights are immutable and
// may be shared by any number of threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/weight_format.h"

namespace tessera::kernels::cpu {

// Output rows interleaved per packed group.
inline constexpr int kInt8GroupRows = 16;

// True for the formats PackInt8Weights accepts: kQ8_0, kQ4_0, kQ4_1.
bool Int8MatmulSupportsFormat(WeightFormat format);

// True when the running CPU has the AVX-512 VNNI kernel (avx512f, avx512bw, avx512vnni); other
// AVX2 CPUs run the AVX2 copy, the rest the portable one (same bits, much slower).
bool Int8VnniSupported();

// Bytes PackInt8Weights writes for w (rows rounded up to a multiple of kInt8GroupRows).
size_t PackedInt8Bytes(WeightFormat format, int64_t rows, int64_t cols);

// A weight matrix repacked for Int8Matmul. Non-owning: `data` points into a buffer of
// PackedInt8Bytes(format, rows, cols) bytes filled by PackInt8Weights, which must outlive it.
struct Int8WeightView {
  WeightFormat format = WeightFormat::kQ4_1;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
};

// Repacks w into out (out.size() >= PackedInt8Bytes(...)); returns the view of the result.
// Preconditions: Int8MatmulSupportsFormat(w.format); w.cols % 32 == 0.
Int8WeightView PackInt8Weights(const WeightView& w, std::span<uint8_t> out);

struct Int8MatmulOutput {
  Int8WeightView w;
  std::span<float> y;  // [m, w.rows]
};

// Quantizes x once and computes every output in one parallel region (one fork/join).
// Preconditions: 1 <= outputs.size() <= 4; all w.cols equal (k, a multiple of 32);
// x.size() >= m * k; each y.size() >= m * w.rows; no y overlaps x or another y; IsaSupported(isa).
// isa == kAvx512 uses the VNNI kernel when Int8VnniSupported(), else the AVX2 one; isa == kAvx2
// the AVX2 one; kScalar the portable copy. All give the same bits.
void Int8MatmulSameInput(ThreadPool& pool, std::span<const float> x, int64_t m,
                         std::span<const Int8MatmulOutput> outputs, Isa isa = BestIsa());

}  // namespace tessera::kernels::cpu
