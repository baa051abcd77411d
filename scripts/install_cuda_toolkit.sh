#!/usr/bin/env bash
# Makes a CUDA toolkit available to the build, so that every machine builds the CUDA backend, the
# GPU tests (label gpu: they skip at run time where no GPU is present) and the SIMT emulator's
# suites (label cuda-emulated), whether or not NVIDIA's toolkit is installed:
#   - an installed toolkit ($CUDA_HOME/bin/nvcc, else /usr/local/cuda/bin/nvcc): used as it is;
#   - none: PyPI's CUDA 13.0 wheels (pinned below) into .venv-cuda/, about 720 MB to download and
#     865 MB installed (docs/testing/no-cuda-toolkit.md):
#       nvidia-cuda-nvcc     nvcc, ptxas, nvlink, fatbinary, cudafe++
#       nvidia-nvvm          cicc and libdevice (nvcc's front end; the nvcc wheel lacks it)
#       nvidia-cuda-crt      nvcc's crt/ headers
#       nvidia-cuda-runtime  CUDA's headers, libcudart.so.13, libcudart_static.a
#       nvidia-cuda-cccl     CUB, Thrust, libcu++ (include/cccl/)
#       nvidia-cublas        libcublas.so.13 and libcublasLt.so.13 (420 MB of the 525): the device
#                            runtime links cuBLAS, so the link needs both, and every binary that
#                            links it loads both when it starts (a GPU test too, before it skips)
#     pip's --no-deps keeps them all at 13.0 (nvidia-cuda-nvcc's own dependencies are unpinned).
#     They install into site-packages/nvidia/cu13/, a toolkit root (bin/, include/, lib/, nvvm/)
#     but for what a toolkit installer adds and nvcc and CMake expect, made here: lib64 -> lib
#     (nvcc's profile links from lib64/) and the unversioned libcudart.so, libcublas.so and
#     libcublasLt.so (FindCUDAToolkit's names).
#     And NCCL's nccl.h, which the tensor-parallel communicator compiles against (it opens
#     libnccl.so.2 at run time, so the library is not needed): taken out of PyPI's
#     nvidia-nccl-cu13 2.28 wheel (196 MB to download, the one 26 kB file kept) into include/.
# --headers-only: only CUDA's headers, for a build without the CUDA backend (-DTESSERA_CUDA=OFF,
# e.g. the CPU image): the emulator compiles our kernels with g++ and needs just those (PyPI:
# nvidia-cuda-runtime, nvidia-cuda-crt and nvidia-cuda-cccl, whose crt/ and nv/ headers CUDA's own
# headers include; 5 MB).
# TESSERA_CUDA_FROM_PYPI=1 takes the PyPI path even where a toolkit is installed (to check it).
# Prints the toolkit root on its last line (its include/ holds the headers; scripts/build.sh hands
# it to CMake). Idempotent, and silent apart from that line when everything is in place.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
needed=("nvidia-cuda-runtime==13.0.*" "nvidia-cuda-crt==13.0.*" "nvidia-cuda-cccl==13.0.*")
files=(include/cuda_runtime.h include/cuda_bf16.h include/cuda_fp4.h include/crt/host_defines.h
       include/cccl/nv/target lib/libcudart_static.a)
nccl=
if [ "${1:-}" != --headers-only ]; then
  needed+=("nvidia-cuda-nvcc==13.0.*" "nvidia-nvvm==13.0.*" "nvidia-cublas==13.0.*")
  files+=(bin/nvcc bin/ptxas nvvm/bin/cicc include/crt/host_config.h include/cccl/cub/cub.cuh
          lib/libcublas.so.13 lib/libcublasLt.so.13)
  nccl="nvidia-nccl-cu13==2.28.*"
fi

if [ "${TESSERA_CUDA_FROM_PYPI:-0}" != 1 ]; then
  for dir in ${CUDA_HOME:+"$CUDA_HOME"} /usr/local/cuda; do
    if [ -x "$dir/bin/nvcc" ] && [ -f "$dir/include/cuda_runtime.h" ]; then
      echo "$dir"
      exit 0
    fi
  done
fi

venv="$root/.venv-cuda"
if [ ! -x "$venv/bin/python" ]; then python3 -m venv "$venv" >&2; fi
purelib=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
toolkit="$purelib/nvidia/cu13"
stamp="$venv/.tessera-cuda-packages"  # the pins installed, one a line: a new pin reinstalls
installed() {  # installed SPEC FILE...: SPEC is in the stamp and every FILE is there
  local file
  grep -qxF "$1" "$stamp" 2>/dev/null || return 1
  shift
  for file in "$@"; do [ -e "$toolkit/$file" ] || return 1; done
}
complete() {
  local spec
  for spec in "${needed[@]}"; do installed "$spec" "${files[@]}" || return 1; done
}
pip=("$venv/bin/python" -m pip --disable-pip-version-check --no-input)
if ! complete; then
  echo "install_cuda_toolkit: no CUDA toolkit installed; installing ${needed[*]} from PyPI" \
       "into $venv" >&2
  "${pip[@]}" install --quiet --no-deps --only-binary=:all: "${needed[@]}" >&2
  printf '%s\n' "${needed[@]}" >>"$stamp"
  complete || { echo "install_cuda_toolkit: $toolkit is incomplete after pip" >&2; exit 1; }
fi
if [ -n "$nccl" ] && ! installed "$nccl" include/nccl.h; then
  echo "install_cuda_toolkit: taking nccl.h out of $nccl from PyPI" >&2
  wheels=$(mktemp -d)
  trap 'rm -rf "$wheels"' EXIT
  "${pip[@]}" download --quiet --no-deps --only-binary=:all: --dest "$wheels" "$nccl" >&2
  "$venv/bin/python" - "$wheels" "$toolkit/include/nccl.h" <<'PY'
import glob, shutil, sys, zipfile
wheels, dest = sys.argv[1:]
(wheel,) = glob.glob(f"{wheels}/nvidia_nccl_cu13-*.whl")
with zipfile.ZipFile(wheel) as z, z.open("nvidia/nccl/include/nccl.h") as src, \
        open(dest, "wb") as out:
    shutil.copyfileobj(src, out)
PY
  echo "$nccl" >>"$stamp"
fi
# What a toolkit installer would have made (cheap, so always checked).
link() {  # link TARGET NAME: NAME -> TARGET unless NAME exists (or is a link already)
  [ -e "$2" ] || [ -L "$2" ] || ln -s "$1" "$2"
}
link lib "$toolkit/lib64"
for lib in cudart cublas cublasLt; do
  [ ! -e "$toolkit/lib/lib$lib.so.13" ] || link "lib$lib.so.13" "$toolkit/lib/lib$lib.so"
done
if [ -e "$toolkit/bin/nvcc" ] && ! "$toolkit/bin/nvcc" --version 2>/dev/null | grep -q 'release 13\.0'; then
  echo "install_cuda_toolkit: $toolkit/bin/nvcc does not run as CUDA 13.0's nvcc" >&2
  exit 1
fi
echo "$toolkit"
