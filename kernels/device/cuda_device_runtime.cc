#include "kernels/device/cuda_device_runtime.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/util/status_macros.h"
#include "kernels/cuda/cuda_current_device.h"

namespace tessera::device {
namespace {

absl::Status CudaStatus(const char* what, cudaError_t error) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorName(error), " (",
                                          cudaGetErrorString(error), ")"));
}

cudaDataType_t CudaType(DataType type) {
  switch (type) {
    case DataType::kF32: return CUDA_R_32F;
    case DataType::kBf16: return CUDA_R_16BF;
    case DataType::kF16: return CUDA_R_16F;
  }
  return CUDA_R_32F;
}

// The architectures this build has kernels for, as major*10+minor ("90a,100a" -> 90, 100).
bool BuiltFor(int major, int minor) {
  for (absl::string_view arch : absl::StrSplit(TESSERA_CUDA_ARCHS, ',')) {
    int number = 0;
    for (char c : arch) {
      if (c >= '0' && c <= '9') number = number * 10 + (c - '0');
    }
    if (number == major * 10 + minor) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaDeviceRuntime>> CudaDeviceRuntime::Open(int device_index,
                                                                       bool sync_each_launch,
                                                                       bool dependent_launch) {
  int count = 0;
  if (cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess) {
    cudaGetLastError();
    const std::string reason = absl::StrCat(cudaGetErrorName(error), " (",
                                            cudaGetErrorString(error), ")");
    // Only "there is no GPU or driver here" is UNAVAILABLE; anything else is a real fault.
    if (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver) {
      return absl::UnavailableError(absl::StrCat("no usable CUDA device: ", reason));
    }
    return absl::InternalError(absl::StrCat("CUDA device query failed: ", reason));
  }
  if (device_index < 0 || device_index >= count) {
    return absl::UnavailableError(
        absl::StrCat("CUDA device ", device_index, " does not exist (", count, " visible)"));
  }
  cudaDeviceProp prop{};
  TESSERA_RETURN_IF_ERROR(
      CudaStatus("cudaGetDeviceProperties", cudaGetDeviceProperties(&prop, device_index)));
  if (!BuiltFor(prop.major, prop.minor)) {
    return absl::FailedPreconditionError(absl::StrCat(
        prop.name, " is compute capability ", prop.major, ".", prop.minor,
        "; this build has kernels for sm_", TESSERA_CUDA_ARCHS,
        " only (rebuild with -DTESSERA_CUDA_ARCHS=...)"));
  }
  std::unique_ptr<CudaDeviceRuntime> runtime(new CudaDeviceRuntime);
  runtime->device_index_ = device_index;
  runtime->sync_each_launch_ = sync_each_launch;
  runtime->dependent_launch_ = dependent_launch;
  runtime->properties_ = {prop.name,  prop.totalGlobalMem, prop.multiProcessorCount,
                          prop.major, prop.minor,          prop.sharedMemPerBlockOptin};
  TESSERA_RETURN_IF_ERROR(runtime->Initialize());
  return runtime;
}

absl::Status CudaDeviceRuntime::Initialize() {
  TESSERA_RETURN_IF_ERROR(UseDevice());
  TESSERA_RETURN_IF_ERROR(CudaStatus(
      "cudaStreamCreate", cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)));
  if (cublasCreate(&cublas_) != CUBLAS_STATUS_SUCCESS ||
      cublasSetStream(cublas_, stream_) != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError("cuBLAS could not be initialised on the device");
  }
  TESSERA_RETURN_IF_ERROR(CudaStatus("cudaMalloc of the cuBLAS workspace",
                                     cudaMalloc(&cublas_workspace_, kCublasWorkspaceBytes)));
  if (cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspaceBytes) !=
      CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError("cublasSetWorkspace failed");
  }
  return absl::OkStatus();
}

absl::Status CudaDeviceRuntime::UseDevice() const {
  return CudaStatus("cudaSetDevice", cuda::UseDeviceOnThisThread(device_index_));
}

absl::Status CudaDeviceRuntime::SyncIfDebugging(const char* what) {
  if (!sync_each_launch_ || capturing_) return absl::OkStatus();
  const cudaError_t error = cudaStreamSynchronize(stream_);
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, " failed on the device (--cuda-sync-each-launch): ",
                                          cudaGetErrorName(error), " (",
                                          cudaGetErrorString(error), ")"));
}

CudaDeviceRuntime::~CudaDeviceRuntime() {
  (void)UseDevice();
  for (cudaGraphExec_t graph : graphs_) cudaGraphExecDestroy(graph);
  for (cudaEvent_t event : events_) cudaEventDestroy(event);
  if (cublas_) cublasDestroy(cublas_);
  if (cublas_workspace_) cudaFree(cublas_workspace_);
  if (stream_) cudaStreamDestroy(stream_);
}

absl::StatusOr<uint64_t> CudaDeviceRuntime::FreeMemoryBytes() {
  TESSERA_RETURN_IF_ERROR(UseDevice());
  size_t free_bytes = 0, total_bytes = 0;
  if (absl::Status s = CudaStatus("cudaMemGetInfo", cudaMemGetInfo(&free_bytes, &total_bytes));
      !s.ok()) {
    return s;
  }
  return free_bytes;
}

absl::StatusOr<void*> CudaDeviceRuntime::Allocate(size_t bytes) {
  TESSERA_RETURN_IF_ERROR(UseDevice());
  if (capturing_) {
    return absl::FailedPreconditionError("device memory cannot be allocated during graph capture");
  }
  void* pointer = nullptr;
  if (cudaError_t error = cudaMalloc(&pointer, bytes); error != cudaSuccess) {
    cudaGetLastError();
    return absl::ResourceExhaustedError(absl::StrCat("cudaMalloc of ", bytes, " bytes: ",
                                                     cudaGetErrorString(error)));
  }
  return pointer;
}

void CudaDeviceRuntime::Free(void* device_pointer) {
  if (!UseDevice().ok() || cudaFree(device_pointer) != cudaSuccess) {
    std::fprintf(stderr, "cudaFree(%p) failed\n", device_pointer);
    std::abort();
  }
}

absl::StatusOr<void*> CudaDeviceRuntime::AllocateHost(size_t bytes) {
  TESSERA_RETURN_IF_ERROR(UseDevice());
  if (capturing_) {
    return absl::FailedPreconditionError("host memory cannot be allocated during graph capture");
  }
  void* pointer = nullptr;
  if (cudaError_t error =
          cudaHostAlloc(&pointer, std::max<size_t>(bytes, 1), cudaHostAllocDefault);
      error != cudaSuccess) {
    cudaGetLastError();
    return absl::ResourceExhaustedError(absl::StrCat("cudaHostAlloc of ", bytes, " bytes: ",
                                                     cudaGetErrorString(error)));
  }
  return pointer;
}

void CudaDeviceRuntime::FreeHost(void* host_pointer) {
  if (host_pointer != nullptr && cudaFreeHost(host_pointer) != cudaSuccess) {
    std::fprintf(stderr, "cudaFreeHost(%p) failed\n", host_pointer);
    std::abort();
  }
}

absl::Status CudaDeviceRuntime::CopyToDevice(void* device_destination, const void* host_source,
                                             size_t bytes) {
  TESSERA_RETURN_IF_ERROR(UseDevice());
  return CudaStatus("cudaMemcpyAsync H2D", cudaMemcpyAsync(device_destination, host_source, bytes,
                                                           cudaMemcpyHostToDevice, stream_));
}

absl::Status CudaDeviceRuntime::CopyToHost(void* host_destination, const void* device_source,
                                           size_t bytes) {
  TESSERA_RETURN_IF_ERROR(UseDevice());
  return CudaStatus("cudaMemcpyAsync D2H", cudaMemcpyAsync(host_destination, device_source, bytes,
                                                           cudaMemcpyDeviceToHost, stream_));
}

absl::Status CudaDeviceRuntime::CopyOnDevice(void* device_destination, const void* device_source,
                                             size_t bytes) {
  TESSERA_RETURN_IF_ERROR(UseDevice());
  return CudaStatus("cudaMemcpyAsync D2D", cudaMemcpyAsync(device_destination, device_source,
                                                           bytes, cudaMemcpyDeviceToDevice,
                                                           stream_));
}

absl::Status CudaDeviceRuntime::Fill(void* device_destination, uint8_t byte, size_t bytes) {
  TESSERA_RETURN_IF_ERROR(UseDevice());
  return CudaStatus("cudaMemsetAsync", cudaMemsetAsync(device_destination, byte, bytes, stream_));
}

absl::Status CudaDeviceRuntime::Synchronize() {
  TESSERA_RETURN_IF_ERROR(UseDevice());
  return CudaStatus("cudaStreamSynchronize", cudaStreamSynchronize(stream_));
}

absl::StatusOr<EventHandle> CudaDeviceRuntime::CreateEvent() {
  TESSERA_RETURN_IF_ERROR(UseDevice());
  cudaEvent_t event = nullptr;
  if (absl::Status s = CudaStatus("cudaEventCreate", cudaEventCreate(&event)); !s.ok()) return s;
  events_.push_back(event);
  return static_cast<EventHandle>(events_.size() - 1);
}

absl::Status CudaDeviceRuntime::RecordEvent(EventHandle event) {
  TESSERA_RETURN_IF_ERROR(UseDevice());
  if (event < 0 || static_cast<size_t>(event) >= events_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown event ", event));
  }
  return CudaStatus("cudaEventRecord", cudaEventRecord(events_[event], stream_));
}

absl::StatusOr<double> CudaDeviceRuntime::ElapsedSeconds(EventHandle start, EventHandle end) {
  TESSERA_RETURN_IF_ERROR(UseDevice());
  for (EventHandle event : {start, end}) {
    if (event < 0 || static_cast<size_t>(event) >= events_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown event ", event));
    }
  }
  if (absl::Status s = CudaStatus("cudaEventSynchronize", cudaEventSynchronize(events_[end]));
      !s.ok()) {
    return s;
  }
  float milliseconds = 0;
  if (absl::Status s = CudaStatus("cudaEventElapsedTime",
                                  cudaEventElapsedTime(&milliseconds, events_[start], events_[end]));
      !s.ok()) {
    return s;
  }
  return milliseconds / 1000.0;
}

absl::Status CudaDeviceRuntime::BeginCapture() {
  TESSERA_RETURN_IF_ERROR(UseDevice());
  if (capturing_) return absl::FailedPreconditionError("a graph capture is already under way");
  if (absl::Status s = CudaStatus("cudaStreamBeginCapture",
                                  cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      !s.ok()) {
    return s;
  }
  capturing_ = true;
  return absl::OkStatus();
}

absl::StatusOr<GraphHandle> CudaDeviceRuntime::EndCapture() {
  TESSERA_RETURN_IF_ERROR(UseDevice());
  if (!capturing_) return absl::FailedPreconditionError("EndCapture without BeginCapture");
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  if (absl::Status s = CudaStatus("cudaStreamEndCapture", cudaStreamEndCapture(stream_, &graph));
      !s.ok()) {
    return s;
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t error = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (absl::Status s = CudaStatus("cudaGraphInstantiate", error); !s.ok()) return s;
  graphs_.push_back(exec);
  return static_cast<GraphHandle>(graphs_.size() - 1);
}

absl::Status CudaDeviceRuntime::Replay(GraphHandle graph) {
  TESSERA_RETURN_IF_ERROR(UseDevice());
  if (graph < 0 || static_cast<size_t>(graph) >= graphs_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown graph ", graph));
  }
  return CudaStatus("cudaGraphLaunch", cudaGraphLaunch(graphs_[graph], stream_));
}

// Row-major c[m,n] = a[m,k]·b[n,k]ᵀ is column-major cᵀ[n,m] = op_T(b)·op_N(a).
absl::Status CudaDeviceRuntime::Gemm(const GemmArgs& args) {
  TESSERA_RETURN_IF_ERROR(UseDevice());
  if (absl::Status valid = ValidateGemm(args); !valid.ok()) return valid;
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t status = cublasGemmEx(
      cublas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(args.n), static_cast<int>(args.m),
      static_cast<int>(args.k), &alpha, args.b, CudaType(args.b_type), static_cast<int>(args.k),
      args.a, CudaType(args.a_type), static_cast<int>(args.k), &beta, args.c,
      CudaType(args.c_type), static_cast<int>(args.n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (status != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cublasGemmEx failed with status ", int(status)));
  }
  return SyncIfDebugging("cublasGemmEx");
}

}  // namespace tessera::device
