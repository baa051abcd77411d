// What the GPU kernel benchmarks share (tessera-cuda-kernels-bench: cuda_kernels_bench.cu and
// cuda_stream_bench.cu): failing loudly, device memory filled with small finite values, the L2
// flush, event timing against the measured copy bandwidth, packed weights and the streaming
// path's workspace. Host code, called from the benchmark thread only.
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/cuda/cuda_launcher.h"
#include "kernels/cuda/packed_format.h"
#include "kernels/cuda/packed_stream_split.h"

namespace tessera::cuda {

inline void Check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(error));
    std::exit(1);
  }
}

inline void Check(const CudaLaunchResult& result, const char* what) {
  if (!result.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, DescribeLaunch(result).c_str());
    std::exit(1);
  }
}

// Device memory for one benchmark, filled with small finite values.
class DeviceArena {
 public:
  void* Get(size_t bytes) {
    void* pointer = nullptr;
    Check(cudaMalloc(&pointer, bytes), "cudaMalloc");
    Check(cudaMemset(pointer, 0x3C, bytes), "cudaMemset");  // bf16/f16 patterns near 1
    pointers_.push_back(pointer);
    return pointer;
  }
  ~DeviceArena() {
    for (void* pointer : pointers_) cudaFree(pointer);
  }

 private:
  std::vector<void*> pointers_;
};

// Measured once at start (main), before any kernel is compared with it.
inline double copy_bandwidth_bytes_per_second = 0;

// Evicts the L2 cache: a write of twice its size (allocated once).
inline void FlushL2() {
  static void* buffer = nullptr;
  static size_t bytes = 0;
  if (buffer == nullptr) {
    int device = 0, l2 = 0;
    Check(cudaGetDevice(&device), "cudaGetDevice");
    Check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), "L2 size");
    bytes = std::max<size_t>(size_t(l2) * 2, size_t{1} << 20);
    Check(cudaMalloc(&buffer, bytes), "cudaMalloc (L2 flush)");
  }
  Check(cudaMemsetAsync(buffer, 0, bytes), "L2 flush");
}

// Times `launch` with events (L2 flushed before each); reports bytes moved and the fraction of
// copy bandwidth. A `launch` of several kernels (launches_per_iteration, each moving
// bytes_per_launch) is timed per kernel: the flush comes before the first only.
template <typename Launch>
void TimeKernel(benchmark::State& state, double bytes_per_launch, Launch launch,
                int launches_per_iteration = 1) {
  cudaEvent_t start, stop;
  Check(cudaEventCreate(&start), "cudaEventCreate");
  Check(cudaEventCreate(&stop), "cudaEventCreate");
  launch();  // warm-up
  Check(cudaDeviceSynchronize(), "warm-up");
  for (auto _ : state) {
    FlushL2();
    Check(cudaEventRecord(start), "cudaEventRecord");
    launch();
    Check(cudaEventRecord(stop), "cudaEventRecord");
    Check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float milliseconds = 0;
    Check(cudaEventElapsedTime(&milliseconds, start, stop), "cudaEventElapsedTime");
    state.SetIterationTime(milliseconds / 1000.0 / launches_per_iteration);
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes_per_launch * state.iterations()));
  state.counters["of_copy_bw"] = benchmark::Counter(
      bytes_per_launch * state.iterations() / copy_bandwidth_bytes_per_second,
      benchmark::Counter::kIsRate);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

// A packed n x k weight of `scheme` in the arena; its bytes (codes, scales, mins, super-scales).
inline PackedLinear ArenaPackedWeight(DeviceArena& arena, PackedScheme scheme, int n, int k,
                                      double* weight_bytes) {
  const size_t groups = size_t(n) * (k / PackedGroupSize(scheme));
  const size_t code_bytes = size_t(n) * PackedRowCodeBytes(scheme, k);
  const size_t scale_bytes = groups * PackedScaleBytes(scheme);
  const size_t min_bytes = groups * PackedMinBytes(scheme);
  const size_t super_bytes = scheme == PackedScheme::kQ4_K ? size_t(n) * (k / 256) * 4 : 0;
  *weight_bytes = double(code_bytes + scale_bytes + min_bytes + super_bytes);
  return {scheme, n, k, static_cast<const uint8_t*>(arena.Get(code_bytes)),
          static_cast<const uint8_t*>(arena.Get(scale_bytes)),
          min_bytes ? static_cast<const uint8_t*>(arena.Get(min_bytes)) : nullptr,
          super_bytes ? static_cast<const uint16_t*>(arena.Get(super_bytes)) : nullptr, 1.0f};
}

// The streaming path's workspace (packed_stream_split.h), zeroed, for a grid of blocks_per_sm
// blocks per SM of this device.
inline PackedStreamWorkspace StreamWorkspace(DeviceArena& arena, int blocks_per_sm) {
  int device = 0, sms = 0;
  Check(cudaGetDevice(&device), "cudaGetDevice");
  Check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count");
  const int blocks = blocks_per_sm * sms;
  void* memory = arena.Get(PackedStreamWorkspaceBytes(blocks));
  Check(cudaMemset(memory, 0, PackedStreamWorkspaceBytes(blocks)), "zero workspace");
  return PackedStreamWorkspaceAt(memory, blocks);
}

}  // namespace tessera::cuda
