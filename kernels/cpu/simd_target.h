// Compiler plumbing for the per-ISA kernel copies (see isa.h).
//
// A kernel body lives in a `*_impl.inc` file that is included once per ISA, inside
//   TESSERA_BEGIN_TARGET_AVX2 / TESSERA_END_TARGET  (and the AVX-512 pair),
// so every function it defines (templates included) is compiled for that ISA only. Standard
// headers must be included before a target region: an inline function defined inside one would be
// compiled for the wider ISA and could be picked by the linker for baseline callers.
#pragma once

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define TESSERA_X86_SIMD 1
#else
#define TESSERA_X86_SIMD 0
#endif

#if defined(__clang__)
#define TESSERA_BEGIN_TARGET_AVX2 \
  _Pragma("clang attribute push(__attribute__((target(\"avx2,fma,f16c\"))), apply_to = function)")
#define TESSERA_BEGIN_TARGET_AVX512                                                            \
  _Pragma(                                                                                     \
      "clang attribute push(__attribute__((target(\"avx512f,avx2,fma,f16c\"))), apply_to = function)")
#define TESSERA_BEGIN_TARGET_AVX512_VNNI                                                     \
  _Pragma(                                                                                   \
      "clang attribute push(__attribute__((target(\"avx512f,avx512bw,avx512vnni,avx2,fma,f16c\"))), apply_to = function)")
#define TESSERA_END_TARGET _Pragma("clang attribute pop")
#else
#define TESSERA_BEGIN_TARGET_AVX2 \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma,f16c\")")
#define TESSERA_BEGIN_TARGET_AVX512 \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx2,fma,f16c\")")
#define TESSERA_BEGIN_TARGET_AVX512_VNNI \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512bw,avx512vnni,avx2,fma,f16c\")")
#define TESSERA_END_TARGET _Pragma("GCC pop_options")
#endif

#define TESSERA_SIMD_INLINE inline __attribute__((always_inline))
