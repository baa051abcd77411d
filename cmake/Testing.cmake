# tessera_add_test(<name> SOURCES <files...> LIBS <targets...> [LABELS <labels...>] [SANITIZE]
#                  [TEST_PREFIX <prefix>])
# Builds a GoogleTest binary into build/bin and registers each test case with CTest.
# Tests run with the repository root as working directory, so `models/` and `tests/data/`
# resolve the same way from every test. TEST_PREFIX keeps CTest names unique when the same test
# sources are built twice (e.g. a sanitized copy): CTest keys labels by test name.
function(tessera_add_test name)
  cmake_parse_arguments(ARG "SANITIZE" "TEST_PREFIX" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest tessera_gtest_main GTest::gmock)
  if(ARG_SANITIZE)
    tessera_sanitize(${name})
  endif()
  set(labels unit)
  if(ARG_LABELS)
    set(labels ${ARG_LABELS})
  endif()
  # Processes the tests start run on the cpu backend ($TESSERA_DEVICE, worker/runner_factory.h),
  # so results do not depend on whether the machine has a GPU; tests of another backend say so
  # with --device, and the gpu-labelled ones keep `auto`.
  set(device cpu)
  if("gpu" IN_LIST labels)
    set(device auto)
    # tools/gpu/bundle.sh packs every gpu-labelled test (cmake/GpuBundle.cmake).
    set_property(GLOBAL APPEND PROPERTY TESSERA_GPU_TEST_TARGETS ${name})
  endif()
  # A list would be split into separate property arguments; escape it into one LABELS value.
  string(REPLACE ";" "\\;" labels "${labels}")
  gtest_discover_tests(${name}
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
    TEST_PREFIX "${ARG_TEST_PREFIX}"
    PROPERTIES LABELS "${labels}" ENVIRONMENT "TESSERA_DEVICE=${device}"
    DISCOVERY_TIMEOUT 60)
endfunction()
