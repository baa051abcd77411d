// Dense GEMM on the CPU for the emulated device (and the reference the cuBLAS path is tested
// against): c[m, n] = a[m, k] · b[n, k]ᵀ, inputs converted to f32, products summed in f32 in
// increasing k, then rounded once to c's type. The order depends on nothing but k, so a row's
// result is the same whatever m is (batch invariance, DESIGN.md §6). Stateless, thread-safe.
#pragma once

#include "absl/status/status.h"
#include "kernels/device/device_runtime.h"

namespace tessera::device {

// Shapes positive, pointers set.
absl::Status ValidateGemm(const GemmArgs& args);
void ReferenceGemm(const GemmArgs& args);

}  // namespace tessera::device
