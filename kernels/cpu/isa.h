// Instruction-set levels the CPU kernels are compiled for, and runtime detection.
//
// The project is never compiled with -march=native: each SIMD kernel is compiled three times
// (scalar baseline, AVX2+FMA, AVX-512F) through GCC target attributes, and every public kernel
// takes an `Isa` (default: the best the running CPU supports). Results are bit-identical between
// kAvx2 and kAvx512 (both use 16 virtual lanes with fused multiply-add and the same reduction
// tree); kScalar uses separate multiply and add, so its results differ in the last bits.
// Thread-safe; detection runs once.
#pragma once

#include <string_view>
#include <vector>

namespace tessera::kernels::cpu {

enum class Isa {
  kScalar,  // portable C++ (any CPU)
  kAvx2,    // x86-64 AVX2 + FMA + F16C
  kAvx512,  // x86-64 AVX-512F (+ AVX2, FMA, F16C)
};

// True when the running CPU (and OS) can execute code for `isa`.
bool IsaSupported(Isa isa);

// The fastest level the running CPU supports.
Isa BestIsa();

// Every level the running CPU supports, scalar first (for tests and benchmarks).
std::vector<Isa> SupportedIsas();

std::string_view IsaName(Isa isa);  // "scalar", "avx2", "avx512"

}  // namespace tessera::kernels::cpu
