#!/usr/bin/env bash
# README command 2: set up, then run every default test suite:
#   unit           — unit and model-backed tests (CTest label "unit")
#   sanitize       — parser tests rebuilt with ASan+UBSan (label "sanitize")
#   cuda-emulated  — CUDA kernels on the CPU through the SIMT emulator, several schedules each
#   e2e, deploy    — real processes on loopback; deploy/ validation (Helm, manifests, Grafana, alerts)
#   gpu            — GPU tests; they report SKIPPED with the reason when no GPU is present
#   fuzz           — a bounded libFuzzer run on the GGUF parser (TESSERA_FUZZ_SECONDS, default 30; 0 = off)
# First every label must have at least its committed number of tests (tests/label_minimums.txt).
# Then every skipped test is listed, and the run fails on any skip tests/skip_allowlist.txt does
# not allow (scripts/check_skips.py; its "N passed, N failed" line closes the run).
# TESSERA_CUDA_STATIC_CHECK=1 also builds every kernel for sm_90a/100a/120a (opt-in: minutes);
# TESSERA_GPU_BUNDLE=1 also builds and checks the GPU bundle (opt-in: build-gpu/, many minutes).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
cd "$root"
fuzz_seconds=${TESSERA_FUZZ_SECONDS:-30}
if [ "$fuzz_seconds" -gt 0 ]; then
  "$root/tests/fuzz/run_gguf_fuzzer.sh" "$fuzz_seconds"
else
  echo "test.sh: GGUF fuzzing disabled (TESSERA_FUZZ_SECONDS=0)"
fi
# Opt-in (minutes of nvcc): every CUDA kernel for sm_90a/100a/120a, failing on spills or local
# memory. The default build already checks sm_90a the same way.
if [ "${TESSERA_CUDA_STATIC_CHECK:-0}" = 1 ]; then
  python3 "$root/tools/cuda/kernel_resources.py" --archs 90a,100a,120a
fi
# Opt-in (many minutes of nvcc): the relocatable GPU bundle (tools/gpu/bundle.sh), checked here
# without a GPU: it unpacks elsewhere, starts, skips with the reason, and validate.sh says why.
if [ "${TESSERA_GPU_BUNDLE:-0}" = 1 ]; then
  "$root/tools/gpu/bundle.sh"
  "$root/tools/gpu/check_bundle.sh"
fi
# Every suite is there: a label with fewer tests than tests/label_minimums.txt fails the run
# before anything runs (a suite that silently stopped being built cannot turn CI green).
python3 "$root/scripts/check_label_counts.py" "$root/build" "$root/tests/label_minimums.txt"
# What only the tests use: Chromium for the web console's browser test (Debian), and the PyPI
# packages of the Python e2e tests (the openai client, selenium) into .venv-e2e/.
"$root/scripts/install_deps.sh" --test-tools
"$root/scripts/install_python_test_deps.sh"
junit="$root/build/ctest-junit.xml"
rm -f "$junit"
ctest_status=0
ctest --test-dir build --output-on-failure --parallel "$(nproc)" --timeout 600 \
  --output-junit "$junit" || ctest_status=$?
skips_status=0
python3 "$root/scripts/check_skips.py" "$junit" "$root/tests/skip_allowlist.txt" || skips_status=$?
[ "$ctest_status" -eq 0 ] && [ "$skips_status" -eq 0 ]
