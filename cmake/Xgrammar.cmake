# xgrammar's C++ core (grammar compiler, JSON-schema/regex/EBNF converters, token-mask matcher),
# built as a static library from its PyPI source distribution, which scripts/fetch_xgrammar.sh
# unpacks into third_party/. Only the core is built: no Python bindings (its own CMakeLists forces
# them on through cmake/config.cmake), no tests, no cpptrace; compiled with our toolchain's
# defaults rather than its -Werror/-flto flags. Consumers link the `xgrammar::core` target.
set(TESSERA_XGRAMMAR_VERSION 0.2.8)
set(TESSERA_XGRAMMAR_DIR "${PROJECT_SOURCE_DIR}/third_party/xgrammar-${TESSERA_XGRAMMAR_VERSION}"
    CACHE PATH "xgrammar's unpacked source distribution")
if(NOT EXISTS "${TESSERA_XGRAMMAR_DIR}/include/xgrammar/xgrammar.h")
  message(FATAL_ERROR "xgrammar ${TESSERA_XGRAMMAR_VERSION} not found at ${TESSERA_XGRAMMAR_DIR}: "
                      "run scripts/fetch_xgrammar.sh (scripts/setup.sh does)")
endif()
file(GLOB_RECURSE tessera_xgrammar_sources CONFIGURE_DEPENDS "${TESSERA_XGRAMMAR_DIR}/cpp/*.cc")
list(FILTER tessera_xgrammar_sources EXCLUDE REGEX "/cpp/tvm_ffi/")
add_library(tessera_xgrammar STATIC ${tessera_xgrammar_sources})
add_library(xgrammar::core ALIAS tessera_xgrammar)
set_target_properties(tessera_xgrammar PROPERTIES CXX_STANDARD 17 POSITION_INDEPENDENT_CODE ON)
# Its sources are not ours: no warnings from them, and no sanitizer/coverage flags we might add.
target_compile_options(tessera_xgrammar PRIVATE -w)
target_include_directories(tessera_xgrammar SYSTEM PUBLIC
  "${TESSERA_XGRAMMAR_DIR}/include"
  "${TESSERA_XGRAMMAR_DIR}/3rdparty/dlpack/include")
target_include_directories(tessera_xgrammar SYSTEM PRIVATE "${TESSERA_XGRAMMAR_DIR}/3rdparty/picojson")
target_compile_definitions(tessera_xgrammar PUBLIC
  XGRAMMAR_ENABLE_CPPTRACE=0 XGRAMMAR_ENABLE_INTERNAL_CHECK=0)
target_link_libraries(tessera_xgrammar PUBLIC Threads::Threads)
