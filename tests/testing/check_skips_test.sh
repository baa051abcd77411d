#!/usr/bin/env bash
# scripts/check_skips.py on hand-written CTest JUnit XML: a skip the allowlist allows (name and
# reason both match) passes; a skip with another reason, or an allowed reason on a test the rule
# does not name, fails and is listed; a failed test fails. Usage: check_skips_test.sh REPO_ROOT
set -uo pipefail
root=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/allow.txt" <<'RULES'
# comment
^Gpu\.  ~ no CUDA GPU
.  ~ ^no AVX-512 on this CPU$
RULES
case_xml() {  # name status [skip message]
  if [ "$2" = notrun ]; then
    printf '<testcase name="%s" status="notrun"><skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/><system-out>x.cc:1: Skipped\n%s\n[  SKIPPED ] %s\n</system-out></testcase>\n' "$1" "$3" "$1"
  elif [ "$2" = fail ]; then
    printf '<testcase name="%s" status="fail"><failure message=""/></testcase>\n' "$1"
  else
    printf '<testcase name="%s" status="run"><system-out>ok</system-out></testcase>\n' "$1"
  fi
}
run() {  # expected-status expected-last-line cases...
  local want=$1 last=$2; shift 2
  { echo '<testsuite>'; for c in "$@"; do eval "case_xml $c"; done; echo '</testsuite>'; } > "$dir/j.xml"
  out=$(python3 "$root/scripts/check_skips.py" "$dir/j.xml" "$dir/allow.txt"); status=$?
  echo "$out"
  [ "$status" -eq "$want" ] || { echo "FAIL: exit $status, expected $want"; exit 1; }
  [ "$(tail -n1 <<<"$out")" = "$last" ] || { echo "FAIL: last line, expected '$last'"; exit 1; }
}
run 0 "2 passed, 0 failed" "A.ok run" "B.ok run" "Gpu.q notrun 'no CUDA GPU: none'" \
    "K.avx notrun 'no AVX-512 on this CPU'"
run 1 "1 passed, 1 failed" "A.ok run" "Model.load notrun 'model missing'"
run 1 "0 passed, 1 failed" "Cpu.q notrun 'no CUDA GPU: none'"
grep -qF 'skipped: Cpu.q: no CUDA GPU: none [NOT ALLOWED]' <<<"$out" || { echo "FAIL: not listed"; exit 1; }
run 1 "1 passed, 1 failed" "A.ok run" "A.bad fail"
# The committed allowlist: the GPU copies may skip for no GPU, the emulated suites may not; only
# the AVX-512 copies' comparisons may skip for no AVX-512.
cp "$root/tests/skip_allowlist.txt" "$dir/allow.txt"
run 0 "1 passed, 0 failed" "gpu_CudaRunnerTest.F32 notrun 'no CUDA GPU: none'" \
    "CpuMatmulIsaTest.Avx2AndAvx512AreBitIdentical notrun 'no AVX-512 on this CPU'" "A.ok run"
run 1 "0 passed, 1 failed" "CudaRunnerTest.F32 notrun 'no CUDA GPU: none'"
run 1 "0 passed, 1 failed" "CudaWorkerTest.Serves notrun 'no CUDA GPU: none'"
run 1 "0 passed, 1 failed" "CpuMatmulTest.Reference notrun 'no AVX-512 on this CPU'"
echo "PASS"
