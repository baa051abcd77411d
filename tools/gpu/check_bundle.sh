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
  ldd "$bin/$exe" | grep -q "$place/tessera-gpu/bin/../lib/" || fail "$exe does not load its libraries from the bundle"
done
echo "check_bundle.sh: every executable starts from $place"

tests=$(cd "$bin" && ls -1 | grep -E '_test$')
[ -n "$tests" ] || fail "no test binaries in the bundle"
for test in $tests; do
  (cd "$place" && env -u TESSERA_EXPECT_GPU "$bin/$test" --gtest_output="json:$place/$test.json" \
    >"$place/$test.log" 2>&1) || fail "$test exited non-zero: $(tail -c 600 "$place/$test.log")"
  skipped=$(python3 - "$place/$test.json" "$test" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
cases = [c for s in doc["testsuites"] for c in s["testsuite"]]
skipped = sum(c.get("result") == "SKIPPED" for c in cases)
# Cases that need no GPU (CPU references, death tests of the test helpers) pass here.
print("%s: %d cases, %d skipped, %d passed without a GPU" % (sys.argv[2], len(cases), skipped,
                                                            len(cases) - skipped),
      file=sys.stderr)
print(skipped)
PY
)
  if [ "$skipped" -gt 0 ] && ! grep -q "no CUDA GPU" "$place/$test.log"; then
    fail "$test skipped without saying 'no CUDA GPU'"
  fi
done

status=0
"$place/tessera-gpu/validate.sh" --quick "$place/report" >"$place/validate.log" 2>&1 || status=$?
[ "$status" -eq 2 ] || fail "validate.sh --quick exited $status (want 2): $(tail -5 "$place/validate.log")"
grep -q "no NVIDIA GPU" "$place/validate.log" || fail "validate.sh did not say why: $(tail -5 "$place/validate.log")"
echo "check_bundle.sh: validate.sh --quick stops clearly: $(grep FATAL "$place/validate.log")"
echo "check_bundle.sh: OK ($(stat -c %s "$bundle" | awk '{printf "%.1f MiB", $1 / 1048576}'))"
