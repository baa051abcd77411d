#!/usr/bin/env bash
# scripts/check_label_counts.py on hand-written CTest directories, against the committed
# tests/label_minimums.txt: exactly every minimum passes; the same build without the emulated CUDA
# suites (what a machine without CUDA's headers configures: label cuda-emulated empty) fails and
# names the label TOO FEW; one test short of a minimum fails too.
# Usage: check_label_counts_test.sh REPO_ROOT
set -uo pipefail
root=$1
minimums=$root/tests/label_minimums.txt
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# fake_build DIR [LABEL=COUNT...]: a CTest directory with, per label of the minimums file, as many
# tests as its minimum, or COUNT where given.
fake_build() {
  local build=$1 label minimum count override
  shift
  mkdir -p "$build"
  : >"$build/CTestTestfile.cmake"
  while read -r label minimum; do
    count=$minimum
    for override in "$@"; do [ "${override%%=*}" = "$label" ] && count=${override#*=}; done
    for ((i = 0; i < count; i++)); do
      printf 'add_test(%s.%d /bin/true)\nset_tests_properties(%s.%d PROPERTIES LABELS "%s")\n' \
        "$label" "$i" "$label" "$i" "$label"
    done >>"$build/CTestTestfile.cmake"
  done < <(sed 's/#.*//' "$minimums" | awk 'NF == 2')
}
run() {  # expected-status build-dir
  out=$(python3 "$root/scripts/check_label_counts.py" "$2" "$minimums"); status=$?
  echo "$out"
  [ "$status" -eq "$1" ] || { echo "FAIL: exit $status, expected $1"; exit 1; }
}

fake_build "$dir/complete"
run 0 "$dir/complete"
grep -q 'TOO FEW' <<<"$out" && { echo "FAIL: TOO FEW with every minimum met"; exit 1; }

emulated=$(awk '$1 == "cuda-emulated" {print $2}' "$minimums")
[ -n "$emulated" ] || { echo "FAIL: $minimums has no cuda-emulated minimum"; exit 1; }
fake_build "$dir/no-emulator" cuda-emulated=0
run 1 "$dir/no-emulator"
grep -qx "check_label_counts: cuda-emulated: 0 tests (minimum $emulated) TOO FEW" <<<"$out" ||
  { echo "FAIL: cuda-emulated not reported TOO FEW"; exit 1; }

gpu=$(awk '$1 == "gpu" {print $2}' "$minimums")
fake_build "$dir/one-short" "gpu=$((gpu - 1))"
run 1 "$dir/one-short"
grep -qx "check_label_counts: gpu: $((gpu - 1)) tests (minimum $gpu) TOO FEW" <<<"$out" ||
  { echo "FAIL: gpu one short not reported TOO FEW"; exit 1; }
echo "PASS"
