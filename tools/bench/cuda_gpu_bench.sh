#!/usr/bin/env bash
# The cuda worker's GPU benchmark, for one GPU (docs/perf/cuda.md says what each number means):
#   1. copy bandwidth and kernel bandwidth fractions (tessera-cuda-kernels-bench, when built);
#   2. decode step time per batch size, hostproc per step and graph replays
#      (tessera-runner-bench --device cuda; batch 1 and 128 are the headline rows);
#   3. serving through `tessera serve --device cuda`: offline throughput at 128 prompt / 128
#      output tokens (concurrency 256), TTFT p50 at concurrency 32, and graph reuse in staggered
#      serving (the worker's graph replay/miss counters before and after).
# Usage: tools/bench/cuda_gpu_bench.sh [BIN_DIR] [MODEL] [DEVICE]
#   DEVICE defaults to cuda; `emulated` runs the same script on the CPU (tiny sizes advised:
#   hostproc and graph reuse are real there, timings are the emulator's).
# Writes everything to stdout; redirect it into docs/perf/ with the GPU's name.
set -euo pipefail
bin=${1:-build/bin}
model=${2:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
device=${3:-cuda}
batches=${BATCHES:-1,8,32,128}
context=${CONTEXT:-512}
requests=${REQUESTS:-1024}

echo "# $(date -u +%FT%TZ) $(uname -n); device $device; model $model"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
fi
if [ -x "$bin/tessera-cuda-kernels-bench" ] && [ "$device" = cuda ]; then
  echo "## kernels: bytes/s and fraction of copy bandwidth"
  "$bin/tessera-cuda-kernels-bench"
fi

echo "## decode steps (tessera-runner-bench)"
"$bin/tessera-runner-bench" --model "$model" --device "$device" --dtype bf16 \
  --batch "$batches" --context "$context" --steps 64

echo "## serving (tessera serve --device $device)"
log=$(mktemp -t cuda-bench.XXXXXX)
"$bin/tessera" serve --model "$model" --device "$device" --port 0 --http-port 0 \
  --worker-metrics-port 0 --max-num-seqs 256 >"$log" 2>"$log.err" &
serve_pid=$!
trap 'kill -TERM "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do grep -q "listening on" "$log" && break; sleep 0.5; done
addr=$(sed -n 's/.*serve: listening on \(.*\)/\1/p' "$log")
metrics=$(sed -n 's/.*tessera-worker metrics on \(.*\)/\1/p' "$log" "$log.err" | head -1)
graph_counters() { curl -s "http://$metrics/metrics" | grep -E '^tessera_graph_(replays|misses|captures)' || true; }
echo "### worker graph counters before"; graph_counters
"$bin/tessera" bench --addr "$addr" --concurrency 32 --num-requests 256 \
  --prompt-tokens 128 --output-tokens 128
"$bin/tessera" bench --addr "$addr" --concurrency 256 --num-requests "$requests" \
  --prompt-tokens 128 --output-tokens 128
echo "### staggered serving: random lengths"
"$bin/tessera" bench --addr "$addr" --concurrency 64 --num-requests 512 \
  --prompt-tokens-range 16:512 --output-tokens-range 16:256
echo "### worker graph counters after"; graph_counters
