#!/usr/bin/env bash
# Configures and builds tessera into build/ (binaries in build/bin/). Extra arguments go to CMake,
# e.g. scripts/build.sh -DTESSERA_CUDA=OFF. The CUDA toolkit comes from
# scripts/install_cuda_toolkit.sh (an installed CUDA 13's, else PyPI's CUDA 13.0 wheels in
# .venv-cuda/), so the CUDA backend, the GPU tests and the emulated suites build on every machine;
# with -DTESSERA_CUDA=OFF only CUDA's headers (the emulated suites need nothing more).
# TESSERA_BUILD_TARGETS (space-separated) builds only those targets (README command 1 builds the
# product binaries, not the test targets); unset: everything. ccache is used where installed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# A build with the CUDA backend off needs only CUDA's headers (the emulator's); else the toolkit.
# Without a -DTESSERA_CUDA argument the backend is AUTO, so an earlier OFF (README command 1 on a
# machine without a GPU) does not stay in the CMake cache for the tests' build.
cuda_args=()
cuda_mode=(-DTESSERA_CUDA=AUTO)
for arg in "$@"; do
  case "$arg" in
    -DTESSERA_CUDA=OFF | -DTESSERA_CUDA:STRING=OFF) cuda_args=(--headers-only) ;;
  esac
  case "$arg" in -DTESSERA_CUDA=* | -DTESSERA_CUDA:STRING=*) cuda_mode=() ;; esac
done
cuda_root=$("$root/scripts/install_cuda_toolkit.sh" "${cuda_args[@]}" | tail -n1)
cmake_cuda=(-DTESSERA_CUDA_INCLUDE_DIR="$cuda_root/include")
if [ ${#cuda_args[@]} -eq 0 ]; then
  cmake_cuda+=(-DCMAKE_CUDA_COMPILER="$cuda_root/bin/nvcc" -DCUDAToolkit_ROOT="$cuda_root")
fi
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  "${cmake_cuda[@]}" "${cuda_mode[@]}" "${launcher[@]}" "$@"
targets=()
for target in ${TESSERA_BUILD_TARGETS:-}; do targets+=(--target "$target"); done
cmake --build "$root/build" --parallel "$(nproc)" "${targets[@]}"
