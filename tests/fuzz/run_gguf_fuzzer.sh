#!/usr/bin/env bash
# Builds the GGUF libFuzzer target in build-fuzz/ (clang, ASan+UBSan) and fuzzes for a while.
#
# Usage: tests/fuzz/run_gguf_fuzzer.sh [seconds]     (default 60)
# Environment: FUZZ_JOBS (ninja -j, default 2).
#
# Seeds: tests/data/gguf_malformed/ and tests/data/gguf_valid/. The growing corpus is kept in
# build-fuzz/gguf_corpus/ between runs; a crashing input is written to build-fuzz/gguf_artifacts/
# and the script exits non-zero. Reproduce with: build-fuzz/bin/gguf_fuzzer <crash-file>.
set -euo pipefail

seconds="${1:-60}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${root}/build-fuzz"

CC=clang CXX=clang++ cmake -S "${root}" -B "${build}" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_CUDA=OFF \
  -DTESSERA_BUILD_TESTS=ON -DTESSERA_SANITIZER_TESTS=OFF -DTESSERA_FUZZ=ON >/dev/null
ninja -C "${build}" -j "${FUZZ_JOBS:-2}" gguf_fuzzer

corpus="${build}/gguf_corpus"
seeds="${build}/gguf_seeds"
artifacts="${build}/gguf_artifacts"
mkdir -p "${corpus}" "${seeds}" "${artifacts}"
cp "${root}"/tests/data/gguf_malformed/*.gguf "${root}"/tests/data/gguf_valid/*.gguf "${seeds}/"

# libFuzzer exits non-zero when it finds a crash, a leak, a timeout or an out-of-memory input.
exec "${build}/bin/gguf_fuzzer" \
  -max_len=65536 -max_total_time="${seconds}" -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="${artifacts}/" \
  "${corpus}" "${seeds}"
