// The device runtime on a real GPU: the CUDA runtime API on one non-blocking stream, stream
// capture into CUDA graphs, events, and cuBLAS (cublasGemmEx, f32 compute) for GEMM. Host code
// only (g++); kernels are launched with cuda::CudaLauncher on stream(). Built only with CUDA.
// Owned by one thread.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "kernels/device/device_runtime.h"

namespace tessera::device {

class CudaDeviceRuntime final : public DeviceRuntime {
 public:
  // UNAVAILABLE / FAILED_PRECONDITION as OpenDevice documents.
  static absl::StatusOr<std::unique_ptr<CudaDeviceRuntime>> Open(int device_index);
  ~CudaDeviceRuntime() override;

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  const DeviceProperties& properties() const override { return properties_; }
  absl::StatusOr<uint64_t> FreeMemoryBytes() override;

  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* device_pointer) override;
  absl::Status CopyToDevice(void* device_destination, const void* host_source,
                            size_t bytes) override;
  absl::Status CopyToHost(void* host_destination, const void* device_source,
                          size_t bytes) override;
  absl::Status CopyOnDevice(void* device_destination, const void* device_source,
                            size_t bytes) override;
  absl::Status Fill(void* device_destination, uint8_t byte, size_t bytes) override;
  absl::Status Synchronize() override;

  absl::StatusOr<EventHandle> CreateEvent() override;
  absl::Status RecordEvent(EventHandle event) override;
  absl::StatusOr<double> ElapsedSeconds(EventHandle start, EventHandle end) override;

  absl::Status BeginCapture() override;
  absl::StatusOr<GraphHandle> EndCapture() override;
  absl::Status Replay(GraphHandle graph) override;
  bool capturing() const override { return capturing_; }

  absl::Status Gemm(const GemmArgs& args) override;

  cudaStream_t stream() const { return stream_; }

 private:
  CudaDeviceRuntime() = default;

  int device_index_ = 0;
  DeviceProperties properties_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  bool capturing_ = false;
  std::vector<cudaEvent_t> events_;
  std::vector<cudaGraphExec_t> graphs_;
};

}  // namespace tessera::device
