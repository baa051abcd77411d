# TESSERA_WITH_CUDA: the code nvcc compiles for a real GPU (the kernels' device builds, the CUDA
# runtime and cuBLAS under the device runtime's cuda implementation) is built: ON when nvcc is
# found (TESSERA_CUDA=AUTO), or forced ON/OFF. scripts/build.sh passes CMAKE_CUDA_COMPILER and
# CUDAToolkit_ROOT from scripts/install_cuda_toolkit.sh (an installed CUDA 13, else PyPI's wheels
# in .venv-cuda/); without them /usr/local/cuda is tried. CMake 3.25 does not know nvcc's C++20
# flag, so it is set by hand.
set(TESSERA_WITH_CUDA OFF)
if(NOT TESSERA_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES ${TESSERA_CUDA_ARCHS})
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    # The build tree's binaries find cudart and cuBLAS through their RUNPATH, also where the
    # dynamic loader does not know the toolkit (PyPI's, in .venv-cuda/).
    list(APPEND CMAKE_BUILD_RPATH "${CUDAToolkit_LIBRARY_DIR}")
    set(TESSERA_WITH_CUDA ON)
  elseif(TESSERA_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TESSERA_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
message(STATUS "tessera: GPU code (nvcc) ${TESSERA_WITH_CUDA} (archs: ${TESSERA_CUDA_ARCHS})")

# TESSERA_WITH_EMULATOR: the SIMT emulator (kernels/simt), which runs CUDA kernels on the CPU,
# and the suites that run kernels on it, in every build that has CUDA's headers and
# Boost.Context (libboost-context-dev), GPU or not (DESIGN.md §11).
find_path(TESSERA_CUDA_INCLUDE_DIR cuda_bf16.h
  HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
find_package(Boost 1.74 COMPONENTS context)
set(TESSERA_WITH_EMULATOR OFF)
if(TESSERA_CUDA_INCLUDE_DIR AND Boost_CONTEXT_FOUND)
  set(TESSERA_WITH_EMULATOR ON)
endif()
message(STATUS
  "tessera: SIMT emulator ${TESSERA_WITH_EMULATOR} (CUDA headers: ${TESSERA_CUDA_INCLUDE_DIR})")
# TESSERA_WITH_DEVICE_BACKENDS: the device runtime (kernels/device) and the runner on it, i.e. the
# worker's `--device cuda` and `--device emulated` backends (worker/cuda, worker/parallel) and
# their tests. The runtime always has the emulated device, so they are built exactly when the
# emulator is; `--device cuda` opens a GPU only where TESSERA_WITH_CUDA is ON as well.
set(TESSERA_WITH_DEVICE_BACKENDS ${TESSERA_WITH_EMULATOR})
message(STATUS "tessera: device backends (cuda, emulated) ${TESSERA_WITH_DEVICE_BACKENDS}")

# The GPU copies of the kernel tests (tests/gpu/gpu_kernel_tests.cmake) and the GPU kernel
# benchmark: built when the configure step sees a GPU (nvidia-smi lists one) or with
# -DTESSERA_GPU_KERNEL_TESTS=ON. nvcc-compiling them costs minutes that GPU-less CI does not spend.
set(TESSERA_GPU_KERNEL_TESTS "AUTO" CACHE STRING "Build the kernel tests for the GPU: AUTO|ON|OFF")
set(build_gpu_kernel_tests OFF)
if(TESSERA_WITH_CUDA AND TESSERA_GPU_KERNEL_TESTS STREQUAL "ON")
  set(build_gpu_kernel_tests ON)
elseif(TESSERA_WITH_CUDA AND TESSERA_GPU_KERNEL_TESTS STREQUAL "AUTO")
  execute_process(COMMAND nvidia-smi -L OUTPUT_VARIABLE gpu_list ERROR_QUIET RESULT_VARIABLE rc)
  if(rc EQUAL 0 AND gpu_list MATCHES "GPU 0")
    set(build_gpu_kernel_tests ON)
  endif()
endif()
set(TESSERA_BUILD_GPU_KERNEL_TESTS ${build_gpu_kernel_tests})
message(STATUS "tessera: GPU kernel tests ${build_gpu_kernel_tests}")
