#!/usr/bin/env bash
# Checks a GPU bundle on a machine WITHOUT a GPU (the "done when" of DESIGN.md §13's kit):
# unpacked into a fresh directory far from the build, every executable starts (--help), every
# GPU test binary runs and reports only "no CUDA GPU" skips, and `validate.sh --quick` stops
# with a clear "no NVIDIA GPU" message and exit status 2.
#   tools/gpu/check_bundle.sh [BUNDLE.tar.xz]   (default: build-gpu/tessera-gpu-bundle.tar.xz)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bundle=${1:-$root/build-gpu/tessera-gpu-bundle.tar.xz}
place=$(mktemp -d -t tessera-bundle-check.XXXXXX)
trap 'rm -rf "$place"' EXIT
tar -C "$place" -xJf "$bundle"
bin=$place/tessera-gpu/bin
fail() { echo "check_bundle.sh: FAIL: $*" >&2; exit 1; }

# Nothing may point into the build tree: every RUNPATH is relative to the file.
for file in "$bin"/* "$place"/tessera-gpu/lib/*; do
  runpath=$(readelf -d "$file" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
  case "$runpath" in '$ORIGIN/../lib' | '$ORIGIN') ;; *) fail "$file has RUNPATH '$runpath'" ;; esac
done
for exe in tessera tessera-worker tessera-router tessera-runner-bench tessera-make-tiny-model; do
  "$bin/$exe" --help >/dev/null 2>"$place/err" || fail "$exe --help: $(head -c 300 "$place/err")"
  ldd "$bin/$exe" | grep -q "$place/tessera-gpu/lib" || fail "$exe does not load its libraries from the bundle"
done
echo "check_bundle.sh: every executable starts from $place"

tests=$(cd "$bin" && ls -1 | grep -E '_test$')
[ -n "$tests" ] || fail "no test binaries in the bundle"
for test in $tests; do
  (cd "$place" && env -u TESSERA_EXPECT_GPU "$bin/$test" --gtest_output="json:$place/$test.json" \
    >"$place/$test.log" 2>&1) || fail "$test exited non-zero: $(tail -c 600 "$place/$test.log")"
  python3 - "$place/$test.json" "$test" <<'PY' || fail "$test ran a GPU case without a GPU"
import json, sys
doc = json.load(open(sys.argv[1]))
cases = [c for s in doc["testsuites"] for c in s["testsuite"]]
ran = [c["name"] for c in cases if c.get("result") != "SKIPPED"]
# Tests that need no GPU (parsers, CPU references) may pass; every skip must say why.
skipped = [c for c in cases if c.get("result") == "SKIPPED"]
print("%s: %d cases, %d skipped (no CUDA GPU), %d ran on the CPU" % (sys.argv[2], len(cases), len(skipped), len(ran)))
sys.exit(0 if skipped else 1)
PY
done
grep -L "no CUDA GPU" "$place"/*_test.log | grep . && fail "a test log lacks the 'no CUDA GPU' reason" || true

status=0
"$place/tessera-gpu/validate.sh" --quick "$place/report" >"$place/validate.log" 2>&1 || status=$?
[ "$status" -eq 2 ] || fail "validate.sh --quick exited $status (want 2): $(tail -5 "$place/validate.log")"
grep -q "no NVIDIA GPU" "$place/validate.log" || fail "validate.sh did not say why: $(tail -5 "$place/validate.log")"
echo "check_bundle.sh: validate.sh --quick stops clearly: $(grep FATAL "$place/validate.log")"
echo "check_bundle.sh: OK ($(stat -c %s "$bundle" | awk '{printf "%.1f MiB", $1 / 1048576}'))"
