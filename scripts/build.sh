#!/usr/bin/env bash
# Configures and builds tessera into build/ (binaries in build/bin/). Extra arguments go to CMake,
# e.g. scripts/build.sh -DTESSERA_CUDA=OFF. CUDA's headers for the SIMT emulator come from
# scripts/install_cuda_headers.sh (a toolkit's, else PyPI's), so the emulated suites always build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cuda_include=$("$root/scripts/install_cuda_headers.sh" | tail -n1)
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DTESSERA_CUDA_INCLUDE_DIR="$cuda_include" "$@"
cmake --build "$root/build" --parallel "$(nproc)"
