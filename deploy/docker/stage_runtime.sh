#!/usr/bin/env bash
# Stages what a runtime image needs from a build: the three tessera executables into STAGE/bin
# and every shared library they load into STAGE/lib, except the ones the runtime base image
# brings itself (glibc, and on CUDA images the CUDA toolkit under /usr/local/cuda and the
# driver libraries the NVIDIA container runtime mounts). The images put STAGE at /opt/tessera.
#   deploy/docker/stage_runtime.sh BIN_DIR STAGE_DIR
# Fails when a library cannot be resolved. Checked by tests/deploy/stage_runtime_test.sh.
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 BIN_DIR STAGE_DIR" >&2
  exit 2
fi
bin_dir=$1
stage=$2
mkdir -p "$stage/bin" "$stage/lib"
for binary in tessera tessera-router tessera-worker; do
  install -m 0755 "$bin_dir/$binary" "$stage/bin/$binary"
done

deps=$(ldd "$stage"/bin/*)
if grep -q "not found" <<<"$deps"; then
  echo "stage_runtime: unresolved libraries:" >&2
  grep "not found" <<<"$deps" >&2
  exit 1
fi
# "libfoo.so.1 => /path/libfoo.so.1 (0x...)" lines; the others are headers, vdso and the loader.
awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' <<<"$deps" | sort -u |
  while read -r name path; do
    case "$name" in
      ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libresolv.so*|libutil.so*)
        continue ;;  # glibc: the base image's (same distribution release as the build stage)
      libcuda.so*|libnvidia-*)
        continue ;;  # the driver, mounted by the NVIDIA container runtime
    esac
    case "$path" in
      /usr/local/cuda*) continue ;;  # the CUDA runtime base image ships the toolkit libraries
    esac
    cp -L "$path" "$stage/lib/$name"
  done
echo "stage_runtime: $(ls "$stage/bin" | wc -l) executables, $(ls "$stage/lib" | wc -l) libraries in $stage"
