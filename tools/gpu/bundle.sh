#!/usr/bin/env bash
# Builds the relocatable GPU bundle (DESIGN.md §13) on a machine without a GPU:
#   tools/gpu/bundle.sh [OUTPUT.tar.xz]     (default: build-gpu/tessera-gpu-bundle.tar.xz)
# A separate Release build in build-gpu/ (-DTESSERA_CUDA=ON, sm_90a, the GPU kernel tests on,
# no sanitizer copies; -lineinfo, so compute-sanitizer names source lines) of the `gpu-bundle`
# target only (cmake/GpuBundle.cmake: tessera,
# tessera-worker, tessera-router, the runner and kernel benches, the tiny-model maker and every
# test labelled gpu). The executables are stripped into tessera-gpu/bin/, the shared libraries
# they need that a CUDA machine does not have (gRPC, protobuf, absl, re2, c-ares,
# prometheus-cpp, boost_context, libstdc++, ...: everything ldd resolves except glibc, the
# driver, cuBLAS and cudart, which come from the GPU machine's own CUDA 13) into
# tessera-gpu/lib/, with RUNPATH $ORIGIN/../lib on executables and $ORIGIN on libraries, plus
# validate.sh, report.py and a MANIFEST; then one .tar.xz (checked to be under 48 MiB).
# Opt-in: not part of the default test run (minutes of nvcc on a 2-core machine).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${TESSERA_GPU_BUILD_DIR:-$root/build-gpu}
output=${1:-$build/tessera-gpu-bundle.tar.xz}
max_bytes=$((48 * 1024 * 1024))  # with the working tree (~11 MB) under the device tool's 64 MiB

"$root/scripts/install_deps.sh"
"$root/scripts/fetch_xgrammar.sh"  # the worker links its C++ core
cuda_root=$("$root/scripts/install_cuda_toolkit.sh" | tail -n1)  # a CUDA 13, else PyPI's
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_CUDA=ON \
  -DCMAKE_CUDA_COMPILER="$cuda_root/bin/nvcc" -DCUDAToolkit_ROOT="$cuda_root" \
  -DTESSERA_CUDA_INCLUDE_DIR="$cuda_root/include" \
  -DTESSERA_CUDA_ARCHS=90a -DTESSERA_GPU_KERNEL_TESTS=ON -DTESSERA_SANITIZER_TESTS=OFF \
  -DTESSERA_FUZZ=OFF -DCMAKE_CUDA_FLAGS=-lineinfo >/dev/null
cmake --build "$build" --target gpu-bundle --parallel "$(nproc)"

stage=$(mktemp -d -t tessera-gpu-bundle.XXXXXX)
trap 'rm -rf "$stage"' EXIT
bundle=$stage/tessera-gpu
mkdir -p "$bundle/bin" "$bundle/lib"
mapfile -t executables <"$build/gpu_bundle_targets.txt"

# Libraries the GPU machine provides itself: glibc and its loader, the NVIDIA driver, and
# CUDA 13's cudart and cuBLAS.
provided='^(linux-vdso|ld-linux|libc\.so|libm\.so|libmvec|libpthread|libdl\.so|librt\.so|libresolv|libutil|libcuda\.so|libnvidia-|libcublas|libcublasLt|libcudart)'
copy_libraries() {
  ldd "$1" | awk '/=> \//{print $1, $3}' | while read -r name path; do
    [[ $name =~ $provided ]] && continue
    [ -e "$bundle/lib/$name" ] || cp -L "$path" "$bundle/lib/$name"
  done
}
for exe in "${executables[@]}"; do
  [ -n "$exe" ] || continue
  cp "$exe" "$bundle/bin/"
  copy_libraries "$exe"
done
for exe in "$bundle"/bin/*; do
  strip --strip-unneeded "$exe"
  patchelf --set-rpath '$ORIGIN/../lib' "$exe"
done
for lib in "$bundle"/lib/*; do
  chmod u+w "$lib"
  strip --strip-unneeded "$lib"
  patchelf --set-rpath '$ORIGIN' "$lib"
done
# Test data the gpu tests read relative to their working directory (validate.sh runs them from
# the bundle's root).
mkdir -p "$bundle/tests/data"
cp -r "$root/tests/data/hybrid" "$bundle/tests/data/"
cp "$root/tools/gpu/validate.sh" "$root/tools/gpu/validate_serving.sh" "$root/tools/gpu/report.py" \
  "$root/tools/gpu/profile_packed.sh" "$root/tools/gpu/step_breakdown.sh" \
  "$bundle/"
{
  echo "commit: $(git -C "$root" rev-parse HEAD)$(git -C "$root" diff --quiet HEAD || echo ' (with uncommitted changes)')"
  echo "built: $(date -u +%FT%TZ) on $(uname -n), $(ldd --version | head -1)"
  echo "cuda archs: 90a; nvcc: $("$cuda_root/bin/nvcc" --version | tail -1)"
  echo "glibc needed: $(objdump -T "$bundle"/bin/* "$bundle"/lib/* 2>/dev/null \
    | grep -o 'GLIBC_[0-9.]*' | sort -Vu | tail -1)"
  echo "executables:"; (cd "$bundle/bin" && ls)
  echo "libraries:"; (cd "$bundle/lib" && ls)
} >"$bundle/MANIFEST"

mkdir -p "$(dirname "$output")"
# xz -9: its 64 MiB dictionary spans several executables, so the kernel images every test
# binary links in are stored about once (-6's 8 MiB window saw none of that: 63 MiB against
# 38 MiB for the same files on 2026-11-28; 28 MiB for 67cf5ef).
tar -C "$stage" -cf - tessera-gpu | xz -9 >"$output"
bytes=$(stat -c %s "$output")
echo "bundle.sh: $output ($((bytes / 1024 / 1024)) MiB, ${#executables[@]} executables, $(ls "$bundle/lib" | wc -l) libraries)"
if [ "$bytes" -ge "$max_bytes" ]; then
  echo "bundle.sh: the bundle is over 48 MiB" >&2
  exit 1
fi
