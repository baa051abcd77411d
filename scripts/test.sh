#!/usr/bin/env bash
# README command 2: set up, then run every default test suite:
#   unit      — unit and model-backed tests (CTest label "unit")
#   sanitize  — parser tests rebuilt with ASan+UBSan (label "sanitize")
#   gpu       — GPU tests; they report SKIPPED with the reason when no GPU is present
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
# Last, so CTest's summary is the closing line of the run.
ctest --test-dir build --output-on-failure --parallel "$(nproc)" --timeout 600
