// The calling thread's current CUDA device. CUDA keeps it per host thread, and a thread that
// never chose one works on device 0: every entry point that touches a device we opened (the
// runtime's calls, kernel launches) makes it current first, so the step thread, a loader thread
// and `--cuda-device N` with N != 0 all reach the same GPU. Host code (g++ or nvcc).
#pragma once

#include <cuda_runtime_api.h>

namespace tessera::cuda {

// The device this thread last made current through UseDeviceOnThisThread (-1: none yet). Only
// that function calls cudaSetDevice in tessera (cuBLAS does not change it), so the cache stays
// true and a launch on the hot path costs one thread-local compare.
inline thread_local int device_current_on_this_thread = -1;

// cudaSuccess when `device` is (now) current on this thread; a negative device means "whatever
// is current" (tests and benches that never chose one).
inline cudaError_t UseDeviceOnThisThread(int device) {
  if (device < 0 || device == device_current_on_this_thread) return cudaSuccess;
  const cudaError_t error = cudaSetDevice(device);
  if (error == cudaSuccess) device_current_on_this_thread = device;
  return error;
}

}  // namespace tessera::cuda
