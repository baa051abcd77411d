#!/usr/bin/env bash
# Configures and builds tessera into build/ (binaries in build/bin/). Extra arguments go to CMake,
# e.g. scripts/build.sh -DTESSERA_CUDA=OFF.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$root/build" --parallel "$(nproc)"
