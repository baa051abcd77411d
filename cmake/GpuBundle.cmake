# The `gpu-bundle` target: everything tools/gpu/bundle.sh packs for a run on a GPU machine (the
# binaries, the benches, the tiny-model maker and every test labelled gpu), and
# gpu_bundle_targets.txt naming each executable, one per line. Only in builds with CUDA.
if(NOT TESSERA_WITH_CUDA)
  return()
endif()
set(bundle_targets tessera tessera-worker tessera-router tessera-runner-bench
    tessera-make-tiny-model)
if(TARGET tessera-cuda-kernels-bench)
  list(APPEND bundle_targets tessera-cuda-kernels-bench)
endif()
get_property(gpu_tests GLOBAL PROPERTY TESSERA_GPU_TEST_TARGETS)
list(APPEND bundle_targets ${gpu_tests})
list(REMOVE_DUPLICATES bundle_targets)
add_custom_target(gpu-bundle)
add_dependencies(gpu-bundle ${bundle_targets})
set(bundle_files "")
foreach(target ${bundle_targets})
  string(APPEND bundle_files "$<TARGET_FILE:${target}>\n")
endforeach()
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/gpu_bundle_targets.txt CONTENT "${bundle_files}")
