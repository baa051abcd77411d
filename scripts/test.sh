#!/usr/bin/env bash
# README command 2: set up, then run every default test suite:
#   unit      — unit and model-backed tests (CTest label "unit")
#   sanitize  — parser tests rebuilt with ASan+UBSan (label "sanitize")
#   gpu       — GPU tests; they report SKIPPED with the reason when no GPU is present
# Then every skipped test is listed, and the run fails on any skip tests/skip_allowlist.txt does
# not allow (scripts/check_skips.py; its "N passed, N failed" line closes the run).
#   fuzz      — a bounded libFuzzer run on the GGUF parser (TESSERA_FUZZ_SECONDS, default 30; 0 = off)
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
# PyPI packages of the Python e2e tests (the openai client) into .venv-e2e/.
"$root/scripts/install_python_test_deps.sh"
junit="$root/build/ctest-junit.xml"
rm -f "$junit"
ctest_status=0
ctest --test-dir build --output-on-failure --parallel "$(nproc)" --timeout 600 \
  --output-junit "$junit" || ctest_status=$?
skips_status=0
python3 "$root/scripts/check_skips.py" "$junit" "$root/tests/skip_allowlist.txt" || skips_status=$?
[ "$ctest_status" -eq 0 ] && [ "$skips_status" -eq 0 ]
