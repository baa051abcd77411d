#!/usr/bin/env bash
# Runs a command as if no CUDA toolkit were installed (root only; nothing outside it changes).
# In a private mount namespace:
#   - every /usr/local/cuda* directory (and $CUDA_HOME's) is covered by an empty tmpfs;
#   - the entries of /usr/local/{bin,include,lib} that point into them (symlinks, and small
#     wrapper scripts such as /usr/local/bin/nvcc) disappear, the other entries stay;
#   - the dynamic loader's cache is rebuilt without those directories;
#   - CUDA_HOME, CUDA_PATH, CUDACXX are unset and every PATH-like entry naming cuda is dropped.
# Then it prints what would still provide CUDA (nothing, or it stops) and runs the command.
# It checks that scripts/install_cuda_toolkit.sh's PyPI path builds every suite, e.g.
#   tools/cuda/without_toolkit.sh bash -c 'cd /tmp/clone && scripts/build.sh'
# (docs/testing/no-cuda-toolkit.md).
set -euo pipefail
if [ "$(id -u)" != 0 ]; then
  echo "without_toolkit: needs root (it mounts in a private mount namespace)" >&2
  exit 1
fi
if [ $# -eq 0 ]; then
  echo "usage: without_toolkit.sh COMMAND [ARG...]" >&2
  exit 2
fi
if [ "${TESSERA_WITHOUT_TOOLKIT_NS:-0}" != 1 ]; then
  exec env TESSERA_WITHOUT_TOOLKIT_NS=1 unshare --mount --propagation private "$0" "$@"
fi

# The toolkits: real directories (the /usr/local/cuda symlink resolves to one of them).
hidden=()
for dir in /usr/local/cuda* ${CUDA_HOME:+"$CUDA_HOME"} ${CUDA_PATH:+"$CUDA_PATH"}; do
  [ -d "$dir" ] || continue
  real=$(readlink -f "$dir")
  case " ${hidden[*]-} " in *" $real "*) ;; *) hidden+=("$real") ;; esac
done

points_into_hidden() {  # $1: a path; true when it resolves into, or is a small script naming, a toolkit
  local target toolkit
  target=$(readlink -f "$1" || true)
  for toolkit in "${hidden[@]}"; do
    case "$target" in "$toolkit" | "$toolkit"/*) return 0 ;; esac
    if [ -f "$1" ] && [ ! -L "$1" ] && [ "$(stat -c %s "$1")" -lt 4096 ] &&
       grep -qsF "$toolkit" "$1"; then
      return 0
    fi
  done
  return 1
}

# Scratch space for the bind mounts and the loader's cache: a tmpfs, seen only in here.
state=/tmp/tessera-without-toolkit
mkdir -p "$state"
mount -t tmpfs none "$state"
# /usr/local/{bin,include,lib}: decided before anything is covered, then rebuilt as a tmpfs of
# symlinks to the kept entries (the originals stay reachable through a bind mount under $state).
for sub in bin include lib; do
  dir=/usr/local/$sub
  if [ ! -d "$dir" ] || [ ${#hidden[@]} -eq 0 ]; then continue; fi
  keep=()
  drop=0
  for entry in "$dir"/* "$dir"/.[!.]*; do
    [ -e "$entry" ] || [ -L "$entry" ] || continue
    if points_into_hidden "$entry"; then drop=$((drop + 1)); else keep+=("$(basename "$entry")"); fi
  done
  [ "$drop" -gt 0 ] || continue
  mkdir -p "$state/orig-$sub"
  mount --bind "$dir" "$state/orig-$sub"
  mount -t tmpfs none "$dir"
  for name in "${keep[@]}"; do ln -s "$state/orig-$sub/$name" "$dir/$name"; done
done
for dir in "${hidden[@]}"; do mount -t tmpfs -o ro none "$dir"; done
# The loader's cache without the covered directories (ldconfig -X: no links written anywhere).
ldconfig -X -C "$state/ld.so.cache"
mount --bind "$state/ld.so.cache" /etc/ld.so.cache

unset CUDA_HOME CUDA_PATH CUDACXX
drop_cuda_entries() {  # $1: a colon-separated list; prints it without the entries naming cuda
  local out=() part
  IFS=: read -ra parts <<<"$1"
  for part in "${parts[@]}"; do
    case "$part" in *cuda* | *CUDA* | "") ;; *) out+=("$part") ;; esac
  done
  (IFS=:; echo "${out[*]-}")
}
for var in PATH LIBRARY_PATH LD_LIBRARY_PATH CPATH CPLUS_INCLUDE_PATH; do
  [ -n "${!var:-}" ] || continue
  value=$(drop_cuda_entries "${!var}")
  if [ -n "$value" ]; then export "$var=$value"; else unset "$var"; fi
done

# What would still provide CUDA: must be nothing.
left=()
[ -z "$(ls -A /usr/local/cuda 2>/dev/null)" ] || left+=("/usr/local/cuda is not empty")
command -v nvcc >/dev/null 2>&1 && left+=("nvcc on PATH: $(command -v nvcc)")
ldconfig -p | grep -qE 'libcudart|libcublas' && left+=("the loader's cache lists libcudart/libcublas")
echo '#include <cuda_runtime.h>' | g++ -x c++ -fsyntax-only - 2>/dev/null &&
  left+=("g++ finds cuda_runtime.h on its default include path")
if [ ${#left[@]} -gt 0 ]; then
  printf 'without_toolkit: CUDA still visible: %s\n' "${left[@]}" >&2
  exit 1
fi
echo "without_toolkit: hidden ${hidden[*]:-nothing}; no nvcc, CUDA headers or libraries left"
exec "$@"
