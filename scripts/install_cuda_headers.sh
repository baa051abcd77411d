#!/usr/bin/env bash
# Makes CUDA's headers available to the SIMT emulator (DESIGN.md §11), so every machine builds the
# emulated CUDA suites (label cuda-emulated) whether or not a CUDA toolkit is installed: the
# emulator compiles our kernels with g++ and needs only CUDA's headers (dim3, the bf16/fp16/fp8/
# fp4 types), never nvcc or a GPU.
#   - a toolkit's headers ($CUDA_HOME/include, else /usr/local/cuda/include): used as they are;
#   - none: PyPI's nvidia-cuda-runtime 13.0 wheel (it ships them) into .venv-cuda-headers/.
# TESSERA_CUDA_HEADERS_FROM_PYPI=1 takes the PyPI path even where a toolkit is installed (to
# check it). Prints the include directory on its last line. Idempotent.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
toolkits=("${CUDA_HOME:+$CUDA_HOME/include}" /usr/local/cuda/include)
[ "${TESSERA_CUDA_HEADERS_FROM_PYPI:-0}" = 1 ] && toolkits=()
for dir in "${toolkits[@]}"; do
  if [ -n "$dir" ] && [ -f "$dir/cuda_bf16.h" ] && [ -f "$dir/cuda_fp4.h" ]; then
    echo "$dir"
    exit 0
  fi
done
venv="$root/.venv-cuda-headers"
if [ ! -x "$venv/bin/python" ]; then python3 -m venv "$venv" >&2; fi
purelib=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
include="$purelib/nvidia/cu13/include"
if [ ! -f "$include/cuda_bf16.h" ]; then
  echo "install_cuda_headers: no CUDA toolkit; installing nvidia-cuda-runtime 13.0 from PyPI" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    "nvidia-cuda-runtime==13.0.*" >&2
fi
[ -f "$include/cuda_bf16.h" ] || { echo "install_cuda_headers: no cuda_bf16.h in $include" >&2; exit 1; }
echo "$include"
