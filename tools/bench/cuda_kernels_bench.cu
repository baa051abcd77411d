// GPU kernel benchmark (Google Benchmark), for a user with an NVIDIA GPU:
//   build/bin/tessera-cuda-kernels-bench [--benchmark_filter=...]
// Each kernel reports the bytes it must move (bytes_per_second) and that rate as a fraction of
// the device's measured copy bandwidth (of_copy_bw): a memory-bound kernel near 1.0 is at its
// bound. Times come from CUDA events around each launch. Without a usable GPU it prints the
// reason and exits 0 having run nothing; it never claims a number it did not measure.
#include <benchmark/benchmark.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/cuda/cuda_launcher.cuh"
#include "kernels/cuda/rms_norm.cuh"

namespace tessera::cuda {
namespace {

void Check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(error));
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

double copy_bandwidth_bytes_per_second = 0;

// Times `launch` with events; reports bytes moved and the fraction of copy bandwidth.
template <typename Launch>
void TimeKernel(benchmark::State& state, double bytes_per_launch, Launch launch) {
  cudaEvent_t start, stop;
  Check(cudaEventCreate(&start), "cudaEventCreate");
  Check(cudaEventCreate(&stop), "cudaEventCreate");
  launch();  // warm-up
  Check(cudaDeviceSynchronize(), "warm-up");
  for (auto _ : state) {
    Check(cudaEventRecord(start), "cudaEventRecord");
    launch();
    Check(cudaEventRecord(stop), "cudaEventRecord");
    Check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float milliseconds = 0;
    Check(cudaEventElapsedTime(&milliseconds, start, stop), "cudaEventElapsedTime");
    state.SetIterationTime(milliseconds / 1000.0);
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes_per_launch * state.iterations()));
  state.counters["of_copy_bw"] = benchmark::Counter(
      bytes_per_launch * state.iterations() / copy_bandwidth_bytes_per_second,
      benchmark::Counter::kIsRate);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

// The reference: device-to-device copy of 256 MiB (read + write counted).
void BM_CopyBandwidth(benchmark::State& state) {
  const size_t bytes = size_t{256} << 20;
  DeviceArena arena;
  void* source = arena.Get(bytes);
  void* destination = arena.Get(bytes);
  TimeKernel(state, 2.0 * bytes, [&] {
    Check(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToDevice), "copy");
  });
}
BENCHMARK(BM_CopyBandwidth)->UseManualTime()->Unit(benchmark::kMicrosecond);

// RMSNorm with residual, bf16: reads x, residual, weight; writes residual, out.
void BM_RmsNormResidual(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0)), hidden = static_cast<int>(state.range(1));
  const size_t elements = size_t(rows) * hidden;
  DeviceArena arena;
  auto* x = static_cast<__nv_bfloat16*>(arena.Get(elements * 2));
  auto* residual = static_cast<__nv_bfloat16*>(arena.Get(elements * 2));
  auto* weight = static_cast<__nv_bfloat16*>(arena.Get(size_t(hidden) * 2));
  auto* out = static_cast<__nv_bfloat16*>(arena.Get(elements * 2));
  CudaLauncher launcher(nullptr);
  TimeKernel(state, 2.0 * (4 * elements + hidden), [&] {
    Check(LaunchRmsNorm(launcher, static_cast<const __nv_bfloat16*>(x), residual,
                        static_cast<const __nv_bfloat16*>(weight), out, rows, hidden, 1e-5f),
          "RmsNorm");
  });
}
BENCHMARK(BM_RmsNormResidual)
    ->Args({1, 4096})->Args({128, 4096})->Args({2048, 4096})
    ->UseManualTime()->Unit(benchmark::kMicrosecond);

// Measures copy bandwidth once before the kernels are compared with it.
bool MeasureCopyBandwidth() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    std::printf("tessera-cuda-kernels-bench: no CUDA GPU (%s); nothing measured\n",
                cudaGetErrorString(error));
    return false;
  }
  const size_t bytes = size_t{256} << 20;
  DeviceArena arena;
  void* source = arena.Get(bytes);
  void* destination = arena.Get(bytes);
  cudaEvent_t start, stop;
  Check(cudaEventCreate(&start), "cudaEventCreate");
  Check(cudaEventCreate(&stop), "cudaEventCreate");
  Check(cudaMemcpy(destination, source, bytes, cudaMemcpyDeviceToDevice), "copy");
  Check(cudaEventRecord(start), "record");
  for (int i = 0; i < 10; ++i) cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToDevice);
  Check(cudaEventRecord(stop), "record");
  Check(cudaEventSynchronize(stop), "sync");
  float milliseconds = 0;
  Check(cudaEventElapsedTime(&milliseconds, start, stop), "elapsed");
  copy_bandwidth_bytes_per_second = 10 * 2.0 * bytes / (milliseconds / 1000.0);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s, measured copy bandwidth %.0f GB/s\n", prop.name,
              copy_bandwidth_bytes_per_second / 1e9);
  return true;
}

}  // namespace
}  // namespace tessera::cuda

int main(int argc, char** argv) {
  if (!tessera::cuda::MeasureCopyBandwidth()) return 0;
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
