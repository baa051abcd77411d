// The emulated device's dense GEMM (EmulatedDeviceRuntime::Gemm), on the CPU:
// c[m, n] = a[m, k] · b[n, k]ᵀ, inputs converted to f32, products summed in f32 in increasing k,
// then rounded once to c's type. The order depends on nothing but k, so a row's result is the
// same whatever m is (batch invariance, DESIGN.md §6). The device runtime test also holds the
// cuBLAS path to it, within a stated tolerance. Stateless, thread-safe.
#pragma once

#include "kernels/device/device_runtime.h"

namespace tessera::device {

// Preconditions: ValidateGemm(args) is OK; a, b and c are host memory.
void EmulatedGemm(const GemmArgs& args);

}  // namespace tessera::device
