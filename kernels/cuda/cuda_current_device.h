// The calling thread's current CUDA device. CUDA keeps it per host thread, and a thread that
// never chose one works on device 0: every entry point that touches a device we opened (the
// runtime's calls, kernel launches) makes it current first, so the step thread, a loader thread
// and `--cuda-device N` with N != 0 all reach the same GPU. Host code (g++ or nvcc).
#pragma once

#include <cuda_runtime_api.h>

namespace tessera::cuda {

// cudaSuccess when `device` is (now) current on this thread; a negative device means "whatever
// is current" (tests and benches that never chose one).
inline cudaError_t UseDeviceOnThisThread(int device) {
  if (device < 0) return cudaSuccess;
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == device) return cudaSuccess;
  return cudaSetDevice(device);
}

}  // namespace tessera::cuda
