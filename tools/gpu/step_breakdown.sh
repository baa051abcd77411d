#!/usr/bin/env bash
# Where a batch-1 packed decode step of the synthetic Llama-3.1-8B shape spends its time, from
# the unpacked bundle (after validate.sh wrote OUT_DIR/logs/ld_library_path.txt):
#   tessera-gpu/step_breakdown.sh OUT_DIR [BUDGET_S]
# writes OUT_DIR/breakdown/:
#   step-F-dl{true,false}.txt  runner-bench step times (batch 1 and 8, context 512, CUDA graphs)
#                              for F = q4_0, nvfp4, bf16, with programmatic dependent launches on
#                              and off (--cuda-dependent-launch)
#   stream-shapes.txt          the streaming GEMM on the 8B shapes (BM_PackedStreamShapes)
#   ncu-stream.txt             ncu's memory workload, scheduler and warp-state sections of the
#                              streaming GEMM (Q4_0, the down projection's 4096 x 14336)
#   ncu-eager.csv              ncu's duration and DRAM bytes of every kernel of eager Q4_0 decode
#                              steps (raw CSV; ncu serialises kernels and flushes caches, so
#                              small kernels read long)
# Opt-in, about three minutes; benchmarks never fail it.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/bin
out=$1/breakdown
budget=${2:-200}
mkdir -p "$out"
started=$(date +%s)
left() { echo $((budget - ($(date +%s) - started))); }
libs=$1/logs/ld_library_path.txt
[ -f "$libs" ] && export LD_LIBRARY_PATH="$(cat "$libs")"
for format in q4_0 nvfp4 bf16; do
  packed=()
  [ "$format" = bf16 ] || packed=(--dummy-weight-format "$format")
  for dependent in true false; do
    [ "$(left)" -gt 30 ] || break 2
    timeout 40 "$bin/tessera-runner-bench" --device cuda --load-format dummy \
      --dummy-shape llama-3.1-8b "${packed[@]}" --context 512 --uncomputed-context \
      --gpu-memory-utilization 0.9 --batch 1,8 --steps 32 --cuda-dependent-launch "$dependent" \
      >"$out/step-$format-dl$dependent.txt" 2>&1
  done
done
[ "$(left)" -gt 30 ] && timeout 60 "$bin/tessera-cuda-kernels-bench" \
  --benchmark_filter=BM_PackedStreamShapes --benchmark_min_time=0.05 >"$out/stream-shapes.txt" 2>&1
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
if [ -n "$ncu" ] && [ "$(left)" -gt 70 ]; then
  timeout 40 "$ncu" --clock-control none --launch-skip 2 --launch-count 2 \
    --kernel-name regex:PackedLinearStream --section MemoryWorkloadAnalysis \
    --section SchedulerStats --section WarpStateStats --section LaunchStats --section Occupancy \
    "$bin/tessera-cuda-kernels-bench" --benchmark_min_time=0.01 \
    --benchmark_filter='BM_PackedStreamShapes/scheme:1/n:4096/k:14336/blocks_per_sm:2' \
    >"$out/ncu-stream.txt" 2>&1
fi
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
grep -E '^BM_PackedStreamShapes' "$out/stream-shapes.txt" 2>/dev/null | awk '{print $1, $2}'
exit 0
