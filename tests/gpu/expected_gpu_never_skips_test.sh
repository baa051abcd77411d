#!/usr/bin/env bash
# A GPU test binary run with TESSERA_EXPECT_GPU=1 never passes by skipping
# (tests/testing/gpu_expectation.h): on a machine without a usable GPU it must exit non-zero with
# the "a GPU is expected" failure; on a GPU machine its tests must run and pass (exit 0, nothing
# skipped). Usage: expected_gpu_never_skips_test.sh GPU_TEST_BINARY
set -uo pipefail
binary=$1
out=$(TESSERA_EXPECT_GPU=1 "$binary" 2>&1)
status=$?
echo "$out" | tail -n 30
if grep -q '\[  SKIPPED \]' <<<"$out"; then
  echo "FAIL: $binary skipped tests although TESSERA_EXPECT_GPU=1"
  exit 1
fi
if [ "$status" -eq 0 ]; then
  echo "OK: a GPU is usable here and every test ran"
  exit 0
fi
if grep -q 'a GPU is expected on this machine (TESSERA_EXPECT_GPU=1' <<<"$out"; then
  echo "OK: without a usable GPU, TESSERA_EXPECT_GPU=1 turned the skips into failures (exit $status)"
  exit 0
fi
echo "FAIL: $binary exited $status for another reason than the missing GPU"
exit 1
