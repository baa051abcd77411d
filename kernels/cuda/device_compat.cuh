// The one header every kernel .cuh includes first. Under nvcc it is CUDA itself; under g++ it
// is the SIMT emulator's device API (kernels/simt/device_api.h), so the same kernel source runs
// on the GPU and, in CI, on the CPU. Shared memory is declared through the macros below so the
// emulator can give each block a fresh, poisoned arena (a plain `static` would keep the previous
// block's data and hide missing barriers).
#pragma once

#if defined(__CUDACC__)

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

// TESSERA_SHARED(float, tile, 256);  ->  __shared__ float tile[256] (16-byte aligned)
#define TESSERA_SHARED(type, name, count) __shared__ __align__(16) type name[count]
// TESSERA_DYNAMIC_SHARED(float, scratch);  ->  the launch's dynamic shared memory as float*
#define TESSERA_DYNAMIC_SHARED(type, name)                               \
  extern __shared__ __align__(16) unsigned char tessera_dynamic_smem_[]; \
  type* name = reinterpret_cast<type*>(tessera_dynamic_smem_)
// TESSERA_UNROLL for (...): fully unroll a constant-trip loop (per-row register arrays indexed by
// the loop variable stay in registers instead of local memory). Nothing under g++: unrolling
// changes no result, and g++ would warn about CUDA's pragma.
#define TESSERA_UNROLL _Pragma("unroll")

#else  // g++: the SIMT emulator

#include "kernels/simt/device_api.h"

#define TESSERA_SHARED(type, name, count)                                                    \
  static const char name##_site_ = 0;                                                         \
  type* const name = static_cast<type*>(::tessera::simt::detail::StaticShared(              \
      &name##_site_, sizeof(type) * (count), alignof(type) < 16 ? 16 : alignof(type),        \
      std::source_location::current()))
#define TESSERA_UNROLL
#define TESSERA_DYNAMIC_SHARED(type, name) \
  type* const name = static_cast<type*>(::tessera::simt::detail::DynamicShared())

#endif
