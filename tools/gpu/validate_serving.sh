#!/usr/bin/env bash
# The serving step of validate.sh: `tessera serve --device cuda` with a worker on the synthetic
# Qwen2.5-1.5B shape (--load-format dummy), driven by `tessera bench` over gRPC with token-id
# prompts: offline throughput at concurrency 64 and 256 (128 prompt + 128 output tokens), TTFT
# and ITL at concurrency 32, and graph reuse under staggered lengths (the worker's graph
# counters before and after). The router's tokenizer comes from a tiny generated GGUF (no model
# file travels), and a worker may not sample ids the router cannot detokenize, so the worker's
# vocabulary is the tokenizer's (--dummy-vocab, a few hundred ids): the 1.5B shape's body with
# a small LM head (its 151936 x 1536 head is 15% of the real model's weight bytes).
#   validate_serving.sh BIN_DIR OUT_DIR [DEVICE SHAPE DIVISOR]   (writes OUT_DIR/bench/serving-*.json)
# TESSERA_SERVING_WORKER_ARGS (space-separated) go to the worker as well (e.g. --no-mixed-graphs,
# "--cuda-graphs eager"). The staggered run goes twice: first with the graphs its steps capture
# on first use (lazy mode), then again on the same server ("staggered-warm": steady state).
# DEVICE SHAPE DIVISOR (default cuda qwen2.5-1.5b 1) let the same steps run here as a dry run:
# `emulated tiny 32` divides every request count by 32.
set -uo pipefail
bin=$1
out=$2
device=${3:-cuda}
shape=${4:-qwen2.5-1.5b}
divisor=${5:-1}
work=$out/work
extra=()
for arg in ${TESSERA_SERVING_WORKER_ARGS:-}; do extra+=("--worker-arg=$arg"); done
"$bin/tessera-make-tiny-model" --out "$work/tokenizer.gguf" --layers 1 --hidden 64 --heads 1 \
  --kv-heads 1 --ffn 64 --context 8192 || exit 1
vocab=$("$bin/tessera" inspect "$work/tokenizer.gguf" | sed -n 's/^vocab: *//p')
echo "router tokenizer: $vocab ids"
"$bin/tessera" serve --model "$work/tokenizer.gguf" --device "$device" --port 0 --http-port 0 \
  --worker-metrics-port 0 --max-num-seqs 256 --max-num-batched-tokens 4096 \
  --worker-arg=--load-format --worker-arg=dummy \
  --worker-arg=--dummy-shape --worker-arg="$shape" --worker-arg=--dummy-vocab \
  --worker-arg="$vocab" "${extra[@]}" \
  >"$work/serve.out" 2>"$work/serve.err" &
serve_pid=$!
trap 'kill -TERM "$serve_pid" 2>/dev/null; wait "$serve_pid" 2>/dev/null' EXIT
for _ in $(seq 1 240); do
  grep -q "listening on" "$work/serve.out" && break
  kill -0 "$serve_pid" 2>/dev/null || { echo "tessera serve exited:"; tail -20 "$work/serve.err"; exit 1; }
  sleep 0.5
done
addr=$(sed -n 's/.*serve: listening on \(.*\)/\1/p' "$work/serve.out")
metrics=$(sed -n 's/.*serve: worker metrics on \(.*\)/\1/p' "$work/serve.out")
[ -n "$addr" ] || { echo "tessera serve never listened:"; tail -20 "$work/serve.err"; exit 1; }
echo "serving on $addr, worker metrics on $metrics"

graph_counters() {  # FILE: the worker's graph series, step counts and tokens (replayed share)
  python3 -c 'import sys, urllib.request
text = urllib.request.urlopen("http://" + sys.argv[1] + "/metrics", timeout=10).read().decode()
keep = ("tessera_graph", "tessera_step_seconds_count", "tessera_step_tokens_total")
print("\n".join(l for l in text.splitlines() if l.startswith(keep)))' "$metrics" >"$1"
}
bench() {  # NAME ARGS...
  local name=$1
  shift
  "$bin/tessera" bench --addr "$addr" --json "$out/bench/serving-$name.json" "$@" ||
    echo "bench $name failed"
}
requests() { echo $(( $1 / divisor > 8 ? $1 / divisor : 8 )); }
bench c32 --concurrency 32 --num-requests "$(requests 128)" --prompt-tokens 128 --output-tokens 128
bench c64 --concurrency 64 --num-requests "$(requests 256)" --prompt-tokens 128 --output-tokens 128
bench c256 --concurrency 256 --num-requests "$(requests 512)" --prompt-tokens 128 \
  --output-tokens 128
graph_counters "$out/bench/graphs-before.txt"
bench staggered --concurrency 64 --num-requests "$(requests 256)" --prompt-tokens-range 16:512 \
  --output-tokens-range 16:256
graph_counters "$out/bench/graphs-after.txt"
bench staggered-warm --concurrency 64 --num-requests "$(requests 256)" \
  --prompt-tokens-range 16:512 --output-tokens-range 16:256
graph_counters "$out/bench/graphs-warm.txt"
