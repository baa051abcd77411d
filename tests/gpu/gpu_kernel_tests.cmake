# The kernel tests of tests/unit/cuda (*_kernel_test.cc) compiled by nvcc for the real GPU
# (TESSERA_KERNEL_TEST_ON_GPU=1, kernel_test_env.h), label gpu. Built when the configure step
# sees a GPU (nvidia-smi lists one) or with -DTESSERA_GPU_KERNEL_TESTS=ON; nvcc-compiling every
# test costs minutes, which GPU-less CI does not spend. Each binary skips with the reason when
# it finds no GPU at run time.
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
message(STATUS "tessera: GPU kernel tests ${build_gpu_kernel_tests}")
if(build_gpu_kernel_tests)
  file(GLOB kernel_tests CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/unit/cuda/*_kernel_test.cc)
  foreach(test_source ${kernel_tests})
    get_filename_component(test_name ${test_source} NAME_WE)
    set(wrapper ${CMAKE_CURRENT_BINARY_DIR}/gpu_${test_name}.cu)
    file(WRITE ${wrapper} "#include \"${test_source}\"\n")
    tessera_add_test(gpu_${test_name}
      SOURCES ${wrapper}
      LIBS tessera_cpu_kernels CUDA::cudart
      LABELS gpu)
    target_compile_definitions(gpu_${test_name} PRIVATE TESSERA_KERNEL_TEST_ON_GPU=1)
  endforeach()
endif()
