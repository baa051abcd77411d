// TESSERA_CHECK: aborts loudly when an internal invariant (a documented precondition) is broken.
// Untrusted input must never reach a check; it gets an absl::Status instead (DESIGN.md §8).
#pragma once

#include <cstdio>
#include <cstdlib>

namespace tessera::util {

[[noreturn]] inline void CheckFailed(const char* file, int line, const char* condition,
                                     const char* message) {
  std::fprintf(stderr, "%s:%d: check failed: %s: %s\n", file, line, condition, message);
  std::fflush(stderr);
  std::abort();
}

}  // namespace tessera::util

// `message` is a C string literal or any expression convertible to const char*.
#define TESSERA_CHECK(condition, message)                                      \
  do {                                                                         \
    if (!(condition)) {                                                        \
      ::tessera::util::CheckFailed(__FILE__, __LINE__, #condition, (message)); \
    }                                                                          \
  } while (false)
