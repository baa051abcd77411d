# The kernel tests of tests/unit/cuda (*_kernel_test.cc) compiled by nvcc for the real GPU
# (TESSERA_KERNEL_TEST_ON_GPU=1, kernel_test_env.h), label gpu, when
# TESSERA_BUILD_GPU_KERNEL_TESTS (cmake/Cuda.cmake). Each binary skips with the reason when it
# finds no GPU at run time and none is expected, and fails when one is
# (tests/testing/gpu_expectation.h).
if(TESSERA_BUILD_GPU_KERNEL_TESTS)
  file(GLOB kernel_tests CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/unit/cuda/*_kernel_test.cc)
  foreach(test_source ${kernel_tests})
    get_filename_component(test_name ${test_source} NAME_WE)
    set(wrapper ${CMAKE_CURRENT_BINARY_DIR}/gpu_${test_name}.cu)
    file(WRITE ${wrapper} "#include \"${test_source}\"\n")
    tessera_add_test(gpu_${test_name}
      SOURCES ${wrapper}
      LIBS tessera_cpu_kernels tessera_cuda_reference tessera_packed_weight tessera_gpu_expectation
           CUDA::cudart
      LABELS gpu
      TEST_PREFIX gpu_)
    target_compile_definitions(gpu_${test_name} PRIVATE TESSERA_KERNEL_TEST_ON_GPU=1)
  endforeach()
  # The managed-memory caps of device_buffer.h (GPU only; needs no GPU to run).
  set(wrapper ${CMAKE_CURRENT_BINARY_DIR}/gpu_device_buffer_cap_test.cu)
  file(WRITE ${wrapper} "#include \"${CMAKE_SOURCE_DIR}/tests/unit/cuda/device_buffer_cap_test.cc\"\n")
  tessera_add_test(gpu_device_buffer_cap_test
    SOURCES ${wrapper}
    LIBS tessera_gpu_expectation CUDA::cudart
    LABELS gpu
    TEST_PREFIX gpu_)
  target_compile_definitions(gpu_device_buffer_cap_test PRIVATE TESSERA_KERNEL_TEST_ON_GPU=1)
endif()
