// The kernels a device model runner launches, behind one virtual interface so the runner is
// ordinary C++ compiled once: each method picks the kernel template (kernels/cuda/*.cuh) for the
// data type and head size given at run time and launches it on the device runtime's stream.
// Two implementations of the same template (device_kernels_impl.h): the SIMT emulator's launcher
// (device_kernels_emulated.cc, the `emulated` device) and CudaLauncher (device_kernels_cuda.cu,
// nvcc, a real GPU). Activation/weight/KV element types are bf16, f16 or f32 (DataType).
//
// Every method enqueues work (or records it while the runtime captures a graph) and returns the
// launch status; an unsupported type or head size is INVALID_ARGUMENT (the runner checks what it
// needs at construction with SupportsHeadDim). Owned by its runner; step thread only.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/block_tables.cuh"
#include "kernels/cuda/gguf_blocks.cuh"
#include "kernels/cuda/paged_decode_attention.cuh"
#include "kernels/cuda/paged_prefill_attention.cuh"
#include "kernels/cuda/random_uniform.cuh"
#include "kernels/cuda/rope.cuh"
#include "kernels/cuda/sampling_types.h"
#include "kernels/device/device_runtime.h"

namespace tessera::worker {

class DeviceKernels {
 public:
  using DataType = device::DataType;
  virtual ~DeviceKernels() = default;

  // Head sizes the attention kernels are built for.
  static bool SupportsHeadDim(int head_dim) { return head_dim == 64 || head_dim == 128; }

  // out[t] = table[ids[t]] (table in its GGUF format), stored as `type`.
  virtual absl::Status Embedding(DataType type, cuda::GgufFormat table_format,
                                 const int32_t* ids, const void* table, void* out,
                                 int num_tokens, int64_t vocab, int hidden) = 0;
  // out = RmsNorm(x) * weight per row of `hidden` (residual null; kernels/cuda/rms_norm.cuh).
  virtual absl::Status RmsNorm(DataType type, const void* x, const void* weight, void* out,
                               int num_rows, int hidden, float eps) = 0;
  virtual absl::Status Rope(DataType type, cuda::RopeStyle style, void* q, void* k,
                            const int32_t* positions, const float* cos_sin, int max_positions,
                            int num_tokens, int num_heads, int num_kv_heads, int head_dim,
                            int rope_dim) = 0;
  // out = silu(gate) * up; out may be gate (each element is read before it is written).
  virtual absl::Status SwiGlu(DataType type, const void* gate, const void* up, void* out,
                              int num_tokens, int width) = 0;
  virtual absl::Status AddInPlace(DataType type, void* inout, const void* delta,
                                  int64_t count) = 0;
  virtual absl::Status AddBias(DataType type, void* inout, const void* bias, int rows,
                               int width) = 0;
  virtual absl::Status GatherRows(DataType type, const void* src, const int32_t* row_indices,
                                  void* dst, int num_rows, int width) = 0;
  // K/V rows through the slot mapping into the pools; slot -1 writes nothing.
  virtual absl::Status KvWrite(DataType type, const void* k, const void* v, void* k_pool,
                               void* v_pool, const int32_t* slot_mapping, int num_tokens,
                               int num_kv_heads, int head_dim) = 0;
  virtual absl::Status DecodeAttention(DataType type, int head_dim,
                                       const cuda::PagedDecodeParams& params, const void* q,
                                       const void* k_pool, const void* v_pool,
                                       const int32_t* block_tables, const int32_t* context_lens,
                                       void* out, float* workspace) = 0;
  virtual absl::Status PrefillAttention(DataType type, int head_dim,
                                        const cuda::PagedPrefillParams& params, const void* q,
                                        const void* k_pool, const void* v_pool,
                                        const int32_t* block_tables,
                                        const int32_t* query_start_loc,
                                        const int32_t* context_lens, void* out) = 0;
  // c[m, n] = a[m, k] · b[n, k]ᵀ with a reduction order independent of m (batch invariant);
  // a and b of `type`, c of c_type.
  virtual absl::Status BatchInvariantGemm(DataType type, DataType c_type, const void* a,
                                          const void* b, void* c, int m, int n, int k) = 0;
  // Block tables (block_tables.cuh): deltas into the persistent per-slot tables, then the
  // step's rows gathered from them.
  virtual absl::Status ScatterTableDeltas(const cuda::TableDelta* deltas, const int32_t* count,
                                          int32_t* tables, int64_t table_entries) = 0;
  virtual absl::Status GatherTableRows(const int32_t* tables, const int32_t* row_slots,
                                       int32_t* out, int num_rows, int stride) = 0;
  // Lets Sampling serve `vocab` (its penalty bitmap in shared memory may need more than CUDA's
  // default 48 KiB). Once, before any step or capture; FAILED_PRECONDITION naming the sizes
  // when the device cannot give one block that much.
  virtual absl::Status PrepareSampling(int vocab) = 0;
  virtual absl::Status Sampling(const float* logits, int num_rows, int vocab,
                                const cuda::SamplingRowParams* params,
                                const cuda::SamplingPenalties& penalties,
                                const cuda::SamplingOutputs& outputs) = 0;
  // out[i] = center + scale * u(seed, stream, i), u in (-1, 1), stored as `type`
  // (random_uniform.cuh): synthetic weights made on the device.
  virtual absl::Status RandomUniform(DataType type, void* out, int64_t count,
                                     const cuda::RandomUniformParams& params) = 0;
};

// The kernels for `runtime` (emulated or cuda); UNAVAILABLE when this build cannot launch on it.
// The runtime must outlive the result.
absl::StatusOr<std::unique_ptr<DeviceKernels>> MakeDeviceKernels(device::DeviceRuntime& runtime);
// The `cuda` half of MakeDeviceKernels: device_kernels_cuda.cu (nvcc), or
// device_kernels_no_cuda.cc (UNAVAILABLE) in builds without CUDA.
absl::StatusOr<std::unique_ptr<DeviceKernels>> MakeCudaKernels(device::DeviceRuntime& runtime);

}  // namespace tessera::worker
