#!/usr/bin/env bash
# Configures and builds tessera into build/ (binaries in build/bin/). Extra arguments go to CMake,
# e.g. scripts/build.sh -DTESSERA_CUDA=OFF. CUDA's headers for the SIMT emulator come from
# scripts/install_cuda_headers.sh (a toolkit's, else PyPI's), so the emulated suites always build.
# TESSERA_BUILD_TARGETS (space-separated) builds only those targets (README command 1 builds the
# product binaries, not the test targets); unset: everything. ccache is used where installed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cuda_include=$("$root/scripts/install_cuda_headers.sh" | tail -n1)
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DTESSERA_CUDA_INCLUDE_DIR="$cuda_include" "${launcher[@]}" "$@"
targets=()
for target in ${TESSERA_BUILD_TARGETS:-}; do targets+=(--target "$target"); done
cmake --build "$root/build" --parallel "$(nproc)" "${targets[@]}"
