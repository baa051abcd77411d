#!/usr/bin/env bash
# Proves and measures the cuda worker on the GPU machine, from the unpacked bundle
# (tools/gpu/bundle.sh; DESIGN.md §13):
#   tessera-gpu/validate.sh [--quick] OUT_DIR
# writes OUT_DIR/report.md and OUT_DIR/report.json (report.py) from what it ran, with every log
# under OUT_DIR/logs. Full run < 8 minutes; --quick (< 3) runs the tests and the batch 1/64
# decode rows only. Steps (each recorded, none stops the others):
#   facts      nvidia-smi: name, memory, driver, clocks
#   ceilings   measured device-to-device copy bandwidth and cuBLAS bf16 GEMM rate
#   tests      every GPU test binary with TESSERA_EXPECT_GPU=1 (a skip is a failure here)
#   decode     step time at batch 1/8/64/256 x context 512/4096 and prefill tokens/s on synthetic
#              Llama-3.1-8B and Qwen2.5-1.5B shapes, and (full only) the hybrid Gated-DeltaNet +
#              MoE Qwen3-Next-80B-A3B widths at 12 of 48 layers (--load-format dummy: weights
#              made on the GPU); the 8B shape again with its projections packed (NVFP4; full:
#              also Q4_K, Q4_0, Q8_0)
#   kernels    the kernel bench, L2 flushed between iterations (full only)
#   serving    tessera serve --device cuda on the 1.5B shape: throughput at concurrency 64 and
#              256, TTFT/ITL at 32, graph reuse under staggered lengths (full only)
#   sanitizer  compute-sanitizer memcheck and racecheck over each kernel test (full only; last,
#              the slowest per result)
# in that order, within a budget (470 s full, 170 s quick) that each step's cap shares.
# Exit status: 0 when every test passed (benchmarks never fail a run), 1 otherwise, 2 when the
# machine has no GPU or the bundle cannot run here.
set -uo pipefail
quick=0
if [ "${1:-}" = "--quick" ]; then quick=1; shift; fi
if [ $# -ne 1 ]; then
  echo "usage: $0 [--quick] OUT_DIR" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/bin
mkdir -p "$1/logs" "$1/tests" "$1/bench" "$1/work"
out=$(cd "$1" && pwd)
started=$(date +%s)
export TESSERA_EXPECT_GPU=1
echo "quick=$quick" >"$out/mode"

# The whole run must end inside one device call: each step gets at most its own cap and what
# is left of the budget (less a reserve for the report); a step with no time left is skipped
# and the report says so.
budget=$([ "$quick" = 1 ] && echo 170 || echo 470)
log() { echo "validate.sh [$(($(date +%s) - started))s] $*" | tee -a "$out/logs/steps.log"; }
time_for() {  # CAP_S: prints the seconds a step may take now (0: none left)
  local left=$((budget - ($(date +%s) - started) - 10))
  [ "$left" -lt 15 ] && { echo 0; return; }
  echo $(( $1 < left ? $1 : left ))
}
out_of_time() { log "SKIPPED $1: out of time"; echo "$1" >>"$out/skipped_steps.txt"; }
fatal() {
  log "FATAL: $*"
  echo "$*" >"$out/fatal"
  python3 "$here/report.py" "$out" >/dev/null 2>&1 || true
  exit 2
}

# --- preflight: a GPU, and the bundle's binaries start here ---------------------------------
command -v nvidia-smi >/dev/null || fatal "no NVIDIA GPU on this machine: nvidia-smi not found"
nvidia-smi -L >"$out/logs/nvidia-smi-L.txt" 2>&1 ||
  fatal "no NVIDIA GPU on this machine: nvidia-smi -L: $(head -c 300 "$out/logs/nvidia-smi-L.txt")"
if ! "$bin/tessera-worker" --help >/dev/null 2>"$out/logs/preflight.txt"; then
  # cuBLAS/cudart may live where the loader does not look (the toolkit, PyTorch's wheels).
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
             $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, d, "lib") for p in nvidia.__path__ for d in os.listdir(p)))' 2>/dev/null); do
    [ -e "$dir/libcublas.so.13" ] || [ -e "$dir/libcublasLt.so.13" ] &&
      export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  done
  "$bin/tessera-worker" --help >/dev/null 2>"$out/logs/preflight.txt" ||
    fatal "the bundle's binaries do not start here: $(head -c 400 "$out/logs/preflight.txt")"
fi
echo "${LD_LIBRARY_PATH:-}" >"$out/logs/ld_library_path.txt"

# --- facts and ceilings ---------------------------------------------------------------------
log "facts"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem,clocks.sm,clocks.mem,power.limit,temperature.gpu,compute_cap \
  --format=csv >"$out/facts.csv" 2>&1
nvidia-smi >"$out/logs/nvidia-smi.txt" 2>&1
cp "$here/MANIFEST" "$out/manifest.txt" 2>/dev/null
log "ceilings"
timeout 120 "$bin/tessera-cuda-kernels-bench" --benchmark_filter='^BM_(CopyBandwidth|GemmBf16/8192)' \
  --benchmark_out="$out/bench/ceilings.json" --benchmark_out_format=json \
  >"$out/logs/ceilings.txt" 2>&1
copy_gbs=$(python3 "$here/report.py" --copy-gbs "$out" 2>/dev/null || echo 0)
log "copy bandwidth ${copy_gbs} GB/s"

# --- tests: every GPU test binary, four at a time, skips count as failures ------------------
run_test() {  # NAME
  local name=$1
  timeout "$test_timeout" "$bin/$name" --gtest_output="json:$out/tests/$name.json" --gtest_brief=1 \
    >"$out/logs/test-$name.txt" 2>&1
  echo "$name $?" >>"$out/tests/exit_codes.txt"
}
export -f run_test
test_timeout=$(time_for 200)
tests_total=$(time_for "$([ "$quick" = 1 ] && echo 120 || echo 240)")
export bin out test_timeout
log "tests (at most ${test_timeout}s each, ${tests_total}s in all)"
: >"$out/tests/exit_codes.txt"
(cd "$bin" && ls -1 | grep -E '_test$') >"$out/tests/binaries.txt"
# From the bundle's root: tests read tests/data/... relative to their working directory.
(cd "$here" && timeout "$tests_total" xargs -P 4 -I{} bash -c 'run_test {}' <"$out/tests/binaries.txt")
log "tests done: $(awk '$2 != 0' "$out/tests/exit_codes.txt" | wc -l) binaries failed"

# --- decode and prefill on synthetic models -------------------------------------------------
decode() {  # SHAPE BATCHES CONTEXTS PREFILLS CAP_S [PACKED_FORMAT] (env: MODE=invariant)
  local seconds name=$1${6:+-$6}${MODE:+-$MODE}
  seconds=$(time_for "$5")
  [ "$seconds" -gt 0 ] || { out_of_time "decode $name"; return; }
  log "decode $name batch $2 context $3 (at most ${seconds}s)"
  timeout "$seconds" "$bin/tessera-runner-bench" --device cuda --load-format dummy --dummy-shape "$1" \
    ${6:+--dummy-weight-format "$6"} ${MODE:+--batch-invariant} \
    --batch "$2" --context "$3" ${4:+--prefill "$4"} --steps 32 --uncomputed-context \
    --gpu-memory-utilization 0.9 --copy-bandwidth-gbs "$copy_gbs" \
    --json "$out/bench/decode-$name.json" >"$out/logs/decode-$name.txt" 2>&1
  echo "$name $?" >>"$out/bench/decode_codes.txt"
}
: >"$out/bench/decode_codes.txt"
if [ "$quick" = 1 ]; then
  decode llama-3.1-8b 1,64 512 "" 60
  decode qwen2.5-1.5b 1,64 512 "" 40
  decode llama-3.1-8b 1,8,64 512 512 30 nvfp4
else
  decode llama-3.1-8b 1,8,64,256 512,4096 512,4096 120
  decode qwen2.5-1.5b 1,8,64,256 512,4096 512,4096 80
  decode qwen3-next-80b-a3b-l12 1,8,64 512,4096 512 50
  # The projections kept packed (W4A16 / W8A16 through the packed-linear kernels).
  for format in nvfp4 q4_k q4_0 q8_0; do
    decode llama-3.1-8b 1,8,64 512 512 30 "$format"
  done
  # Batch-invariant mode (tensor-core invariant GEMMs, every row through the prefill kernel)
  # against the default rows above: issue 26's budget is <= 1.5x.
  MODE=invariant decode llama-3.1-8b 1,64 512,4096 4096 40
fi

# --- the kernel bench -----------------------------------------------------------------------
if [ "$quick" = 0 ]; then
  seconds=$(time_for 60)
  log "kernels (at most ${seconds}s)"
  [ "$seconds" -gt 0 ] && timeout "$seconds" "$bin/tessera-cuda-kernels-bench" --benchmark_min_time=0.05 \
    --benchmark_out="$out/bench/kernels.json" --benchmark_out_format=json \
    >"$out/logs/kernels.txt" 2>&1
fi

# --- serving --------------------------------------------------------------------------------
if [ "$quick" = 0 ]; then
  seconds=$(time_for 100)
  if [ "$seconds" -gt 0 ]; then
    log "serving (at most ${seconds}s)"
    timeout "$seconds" bash "$here/validate_serving.sh" "$bin" "$out" >"$out/logs/serving.txt" 2>&1
    echo $? >"$out/bench/serving_code.txt"
  else
    out_of_time serving
  fi
fi

# --- compute-sanitizer over the kernel tests ------------------------------------------------
sanitize() {  # TOOL NAME
  local tool=$1 name=$2
  # Tests named *LaunchError* provoke a failing launch on purpose, which memcheck counts as an
  # error of the program: they are left out here (the tests step runs them).
  timeout "$sanitize_timeout" "$sanitizer" --tool "$tool" --error-exitcode 86 "$bin/$name" \
    --gtest_brief=1 --gtest_filter='-*LaunchError*' \
    >"$out/logs/sanitizer-$tool-$name.txt" 2>&1
  echo "$tool $name $?" >>"$out/tests/sanitizer_codes.txt"
}
if [ "$quick" = 0 ]; then
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  : >"$out/tests/sanitizer_codes.txt"
  if [ -z "$sanitizer" ]; then
    echo "compute-sanitizer not found" >"$out/tests/sanitizer_unavailable.txt"
  else
    export -f sanitize
    export sanitizer
    for tool in memcheck racecheck; do
      sanitize_timeout=$(time_for 120)
      [ "$sanitize_timeout" -gt 0 ] || { out_of_time "sanitizer $tool"; continue; }
      export sanitize_timeout
      log "sanitizer $tool (at most ${sanitize_timeout}s per binary)"
      (cd "$bin" && ls -1 | grep -E '^gpu_.*_kernel_test$') | xargs -P 16 -I{} bash -c "sanitize $tool {}"
    done
  fi
fi

log "report"
python3 "$here/report.py" "$out" >"$out/logs/report.txt" 2>&1 || log "report.py failed"
log "done in $(($(date +%s) - started)) s: $out/report.md"
# Every listed test binary finished, and each exited 0.
[ "$(wc -l <"$out/tests/exit_codes.txt")" -eq "$(wc -l <"$out/tests/binaries.txt")" ] &&
  awk '$2 != 0 {bad = 1} END {exit bad}' "$out/tests/exit_codes.txt"
