#!/usr/bin/env bash
# Where the packed-weight decode spends its time on the GPU machine, from the unpacked bundle
# (tools/gpu/bundle.sh; run after validate.sh has written OUT_DIR/logs/ld_library_path.txt, or
# with LD_LIBRARY_PATH already set):
#   tessera-gpu/profile_packed.sh OUT_DIR [BUDGET_S]
# writes OUT_DIR/profile/*.txt and prints a short summary:
#   decode   runner-bench step time of the synthetic Llama-3.1-8B shape with its projections
#            dense (bf16) and packed (nvfp4, q4_k, q4_0, q8_0), batch 1 / 8 / 64, context 512;
#            the weight bytes a batch-1 step reads over the step time against the copy bandwidth
#   kernels  ncu per-kernel times of one packed nvfp4 decode step (batch 1), and the batch-1
#            packed decode GEMM's (packed_linear_stream.cuh) speed-of-light, occupancy, warp-stall
#            (per reason) and instruction statistics at m = 1, n = 4096, k = 14336 (Q4_0 and
#            NVFP4) from the kernel bench
# Opt-in, minutes; benchmarks never fail it (exit 0 unless the bundle cannot run).
set -uo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 OUT_DIR [BUDGET_S]" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/bin
out=$1/profile
budget=${2:-240}
mkdir -p "$out"
started=$(date +%s)
left() { echo $((budget - ($(date +%s) - started))); }
[ -f "$1/logs/ld_library_path.txt" ] && export LD_LIBRARY_PATH="$(cat "$1/logs/ld_library_path.txt")"
copy_gbs=$(python3 "$here/report.py" --copy-gbs "$1" 2>/dev/null || echo 0)

for format in bf16 nvfp4 q4_k q4_0 q8_0; do
  [ "$(left)" -gt 30 ] || { echo "out of time before decode $format" >>"$out/skipped.txt"; break; }
  packed=()
  [ "$format" = bf16 ] || packed=(--dummy-weight-format "$format")
  timeout 40 "$bin/tessera-runner-bench" --device cuda --load-format dummy \
    --dummy-shape llama-3.1-8b "${packed[@]}" --batch 1,8,64 --context 512 --steps 32 \
    --uncomputed-context --gpu-memory-utilization 0.9 --copy-bandwidth-gbs "$copy_gbs" \
    --json "$out/decode-$format.json" >"$out/decode-$format.txt" 2>&1
done

ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
if [ -n "$ncu" ] && [ "$(left)" -gt 40 ]; then
  # One decode step after warm-up: the runner bench's first steps capture graphs, so profile
  # eager launches (--cuda-graphs off) and skip the set-up kernels.
  timeout "$(( $(left) / 2 ))" "$ncu" --clock-control none --print-summary per-kernel \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum \
    --launch-skip 2000 --launch-count 600 \
    "$bin/tessera-runner-bench" --device cuda --load-format dummy --dummy-shape llama-3.1-8b \
    --dummy-weight-format nvfp4 --cuda-graphs off --batch 1 --context 512 --steps 8 \
    --uncomputed-context --gpu-memory-utilization 0.9 >"$out/ncu-decode-nvfp4.txt" 2>&1
  for scheme in 1 4; do
    [ "$(left)" -gt 20 ] || break
    timeout "$(( $(left) / 2 ))" "$ncu" --clock-control none \
      --section SpeedOfLight --section Occupancy --section WarpStateStats \
      --section SchedulerStats --section LaunchStats --section MemoryWorkloadAnalysis \
      --section InstructionStats --kernel-name regex:PackedLinearStream --launch-count 1 \
      --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
      "$bin/tessera-cuda-kernels-bench" \
      --benchmark_filter="BM_PackedLinear/scheme:$scheme/m:1/k:14336/path:3/" --benchmark_min_time=0.01 \
      >"$out/ncu-small-m-scheme$scheme.txt" 2>&1
  done
fi

echo "profile_packed.sh: $(($(date +%s) - started)) s"
for f in "$out"/decode-*.txt; do
  echo "== $(basename "$f")"
  grep -E '^ *(1|8|64) +512 ' "$f" | head -3
done
for f in "$out"/ncu-small-m-*.txt; do
  [ -f "$f" ] || continue
  echo "== $(basename "$f")"
  grep -E 'Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|Executed Ipc A|stalled_.* [0-9.]+$' "$f" | head -30
done
exit 0
