#!/usr/bin/env bash
# Makes a CUDA 13 toolkit available to the build, so that every machine builds the CUDA backend,
# the GPU tests (label gpu: they skip at run time where no GPU is present) and the SIMT emulator's
# suites (label cuda-emulated), whether or not NVIDIA's toolkit is installed:
#   - a CUDA 13 toolkit ($CUDA_HOME, else /usr/local/cuda; its bin/nvcc says "release 13."):
#     used as it is;
#   - none: PyPI's CUDA 13.0 wheels (pinned below) into .venv-cuda/, about 525 MB to download and
#     840 MB installed (docs/testing/no-cuda-toolkit.md):
#       nvidia-cuda-nvcc     nvcc, ptxas, nvlink, fatbinary, cudafe++
#       nvidia-nvvm          cicc and libdevice (nvcc's front end; the nvcc wheel lacks it)
#       nvidia-cuda-crt      nvcc's crt/ headers
#       nvidia-cuda-runtime  CUDA's headers, libcudart.so.13, libcudart_static.a
#       nvidia-cuda-cccl     CUB, Thrust, libcu++ (include/cccl/)
#       nvidia-cublas        libcublas.so.13 and libcublasLt.so.13: the device runtime links
#                            cuBLAS, so every binary that links it loads both when it starts
#                            (a GPU test too, before it can skip), and the link needs them.
#     pip's --no-deps keeps them at 13.0 (nvidia-cuda-nvcc's own dependencies are unpinned). They
#     all install into site-packages/nvidia/cu13/, a toolkit root (bin/, include/, lib/, nvvm/)
#     but for two things, added here: lib64 -> lib (nvcc's profile links from lib64/) and the
#     unversioned libcudart.so, libcublas.so, libcublasLt.so (FindCUDAToolkit's names).
# TESSERA_CUDA_FROM_PYPI=1 takes the PyPI path even where a toolkit is installed (to check it).
# Prints the toolkit root on its last line (scripts/build.sh hands it to CMake). Idempotent, and
# silent apart from that line when everything is in place.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
packages=(
  "nvidia-cuda-nvcc==13.0.*" "nvidia-nvvm==13.0.*" "nvidia-cuda-crt==13.0.*"
  "nvidia-cuda-runtime==13.0.*" "nvidia-cuda-cccl==13.0.*" "nvidia-cublas==13.0.*"
)

is_cuda13() { [ -x "$1/bin/nvcc" ] && "$1/bin/nvcc" --version 2>/dev/null | grep -q 'release 13\.'; }

if [ "${TESSERA_CUDA_FROM_PYPI:-0}" != 1 ]; then
  for dir in ${CUDA_HOME:+"$CUDA_HOME"} /usr/local/cuda; do
    if is_cuda13 "$dir"; then
      echo "$dir"
      exit 0
    elif [ -x "$dir/bin/nvcc" ]; then
      echo "install_cuda_toolkit: $dir/bin/nvcc is not CUDA 13; not using it" >&2
    fi
  done
fi

venv="$root/.venv-cuda"
if [ ! -x "$venv/bin/python" ]; then python3 -m venv "$venv" >&2; fi
purelib=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
toolkit="$purelib/nvidia/cu13"
stamp="$venv/.tessera-cuda-packages"  # what was installed; a new pin list reinstalls
complete() {
  [ "$(cat "$stamp" 2>/dev/null)" = "${packages[*]}" ] || return 1
  for file in bin/nvcc bin/ptxas nvvm/bin/cicc include/crt/host_config.h include/cuda_runtime.h \
              include/cuda_fp4.h include/cccl/cub/cub.cuh lib/libcudart_static.a \
              lib/libcublas.so.13 lib/libcublasLt.so.13; do
    [ -e "$toolkit/$file" ] || return 1
  done
}
if ! complete; then
  echo "install_cuda_toolkit: no CUDA 13 toolkit; installing ${packages[*]} from PyPI" \
       "(about 525 MB) into $venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input --no-deps \
    --only-binary=:all: "${packages[@]}" >&2
  echo "${packages[*]}" >"$stamp"
  complete || { echo "install_cuda_toolkit: $toolkit is incomplete after pip" >&2; exit 1; }
fi
# What a toolkit installer would have made (cheap, so always checked).
[ -L "$toolkit/lib64" ] || ln -s lib "$toolkit/lib64"
for lib in cudart cublas cublasLt; do
  [ -L "$toolkit/lib/lib$lib.so" ] || ln -s "lib$lib.so.13" "$toolkit/lib/lib$lib.so"
done
is_cuda13 "$toolkit" || { echo "install_cuda_toolkit: $toolkit/bin/nvcc does not run" >&2; exit 1; }
echo "$toolkit"
