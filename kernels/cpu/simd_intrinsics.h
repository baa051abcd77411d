// <immintrin.h>, included with GCC 12's false -Wuninitialized / -Wmaybe-uninitialized warnings
// silenced: its AVX-512 intrinsics build results from _mm512_undefined_* (GCC PR 105593, fixed in
// later releases). The pragmas cover only the locations inside the intrinsics headers.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif
#endif
