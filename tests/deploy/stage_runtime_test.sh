#!/usr/bin/env bash
# deploy/docker/stage_runtime.sh on the real build: the staged set is closed. Every library the
# staged executables and libraries load resolves into STAGE/lib, except the ones the runtime base
# image provides (glibc, CUDA toolkit/driver); the staged executables start from the stage
# (--help). Usage: tests/deploy/stage_runtime_test.sh BIN_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin_dir=$1
stage=$(mktemp -d -t tessera_stage.XXXXXX)
trap 'rm -rf "$stage"' EXIT
"$root/deploy/docker/stage_runtime.sh" "$bin_dir" "$stage"

failures=0
for file in "$stage"/bin/* "$stage"/lib/*; do
  while read -r name path; do
    case "$name" in
      ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libresolv.so*|libutil.so*|libcuda.so*|libnvidia-*) continue ;;
    esac
    case "$path" in "$stage"/lib/*|/usr/local/cuda*) continue ;; esac
    echo "FAIL $(basename "$file") loads $name from $path, outside the stage"
    failures=$((failures + 1))
  done < <(LD_LIBRARY_PATH="$stage/lib" ldd "$file" | awk '$2 == "=>" {print $1, $3}')
done
for binary in tessera tessera-router tessera-worker; do
  if ! LD_LIBRARY_PATH="$stage/lib" "$stage/bin/$binary" --help >/dev/null; then
    echo "FAIL $binary --help from the stage"
    failures=$((failures + 1))
  fi
done
if [ "$failures" -eq 0 ]; then
  echo "PASS the stage is closed: $(ls "$stage/lib" | wc -l) libraries; 3 executables start"
  echo "1 passed, 0 failed"
else
  echo "0 passed, 1 failed"
  exit 1
fi
