#!/usr/bin/env bash
# Where a batch-1 packed decode step of the synthetic Llama-3.1-8B shape spends its time, from
# the unpacked bundle (after validate.sh wrote OUT_DIR/logs/ld_library_path.txt):
#   tessera-gpu/step_breakdown.sh OUT_DIR [BUDGET_S]
# writes OUT_DIR/breakdown/:
#   step-F-{tile,every}.txt    runner-bench step times (batch 1 and 8, context 512, CUDA graphs)
#                              for F = q4_0, nvfp4, with the packed GEMM's split where the row
#                              tiles fit (--cuda-packed-stream-grid); step-bf16.txt for bf16
#   stream-shapes.txt          the streaming GEMM on the 8B shapes (BM_PackedStreamShapes: the
#                              split and register-cap configs, single and chained launches;
#                              BM_PackedStreamSwiGlu: the SwiGlu epilogue against its own launch)
#   ncu-stream-configC.txt     ncu's memory workload, scheduler and warp-state sections of the
#                              streaming GEMM (Q4_0, the down projection's 4096 x 14336), with a
#                              block per tile (C = 0) and over every resident block (C = 1)
#   ncu-eager.csv              ncu's duration and DRAM bytes of every kernel of eager Q4_0 decode
#                              steps (raw CSV; ncu serialises kernels and flushes caches, so
#                              small kernels read long)
# Opt-in, about four minutes; benchmarks never fail it.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/bin
out=$1/breakdown
budget=${2:-240}
mkdir -p "$out"
started=$(date +%s)
left() { echo $((budget - ($(date +%s) - started))); }
libs=$1/logs/ld_library_path.txt
[ -f "$libs" ] && export LD_LIBRARY_PATH="$(cat "$libs")"
step() {  # step FORMAT NAME FLAGS...: a runner-bench row set into step-NAME.txt
  local format=$1 name=$2 packed=()
  shift 2
  [ "$format" = bf16 ] || packed=(--dummy-weight-format "$format")
  [ "$(left)" -gt 30 ] || return 0
  timeout 40 "$bin/tessera-runner-bench" --device cuda --load-format dummy \
    --dummy-shape llama-3.1-8b "${packed[@]}" --context 512 --uncomputed-context \
    --gpu-memory-utilization 0.9 --batch 1,8 --steps 32 "$@" >"$out/step-$name.txt" 2>&1
}
for format in q4_0 nvfp4; do
  step "$format" "$format-tile" --cuda-packed-stream-grid tile
  step "$format" "$format-every" --cuda-packed-stream-grid every
done
step bf16 bf16
[ "$(left)" -gt 30 ] && timeout 90 "$bin/tessera-cuda-kernels-bench" \
  --benchmark_filter=BM_PackedStream --benchmark_min_time=0.05 >"$out/stream-shapes.txt" 2>&1
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
for config in 0 1; do  # the down projection: a block per tile, and every resident block
  if [ -n "$ncu" ] && [ "$(left)" -gt 70 ]; then
    timeout 40 "$ncu" --clock-control none --launch-skip 2 --launch-count 2 \
      --kernel-name regex:PackedLinearStream --section MemoryWorkloadAnalysis \
      --section SchedulerStats --section WarpStateStats --section LaunchStats --section Occupancy \
      "$bin/tessera-cuda-kernels-bench" --benchmark_min_time=0.01 \
      --benchmark_filter="BM_PackedStreamShapes/scheme:1/n:4096/k:14336/config:$config/chained:0" \
      >"$out/ncu-stream-config$config.txt" 2>&1
  fi
done
if [ -n "$ncu" ] && [ "$(left)" -gt 40 ]; then
  timeout "$(( $(left) - 5 ))" "$ncu" --clock-control none --csv --page raw \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum --launch-skip 1500 --launch-count 700 \
    "$bin/tessera-runner-bench" --device cuda --load-format dummy --dummy-shape llama-3.1-8b \
    --dummy-weight-format q4_0 --context 512 --uncomputed-context --gpu-memory-utilization 0.9 \
    --batch 1 --steps 12 --cuda-graphs off \
    >"$out/ncu-eager.csv" 2>"$out/ncu.err"
fi
echo "step_breakdown.sh: $(($(date +%s) - started)) s"
for f in "$out"/step-*.txt; do
  echo "== $(basename "$f")"
  grep -E '^ +(1|8) +512 ' "$f"
done
grep -E '^BM_PackedStream' "$out/stream-shapes.txt" 2>/dev/null
exit 0
