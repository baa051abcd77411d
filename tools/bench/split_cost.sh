#!/usr/bin/env bash
# The cost of the router/worker split at concurrency 1: decode tok/s of the same request run
# offline in-process (`tessera generate --model`) and through `tessera serve` (`tessera generate
# --addr`), alternating, REPS times each; prints every run and the medians.
# Usage: tools/bench/split_cost.sh [BIN_DIR] [REPS] [MAX_TOKENS] [THREADS]
set -euo pipefail
bin=${1:-build/bin}
reps=${2:-5}
max_tokens=${3:-256}
threads=${4:-2}
model=models/SmolLM2-135M-Instruct.Q4_1.gguf
# A fixed 128-token prompt (token ids 1000..1127) so both paths see identical input.
ids=$(seq -s, 1000 1127)

log=$(mktemp -t split-cost.XXXXXX)
"$bin/tessera" serve --model "$model" --port 0 --http-port 0 --threads "$threads" >"$log" 2>/dev/null &
serve_pid=$!
trap 'kill -TERM "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 240); do grep -q "listening on" "$log" && break; sleep 0.5; done
addr=$(sed -n 's/.*listening on \(.*\)/\1/p' "$log")

tok_s() { grep -o '[0-9.]* tok/s' | tail -1 | cut -d' ' -f1; }
offline=(); served=()
for r in $(seq 1 "$reps"); do
  o=$("$bin/tessera" generate --model "$model" --threads "$threads" --token-ids "$ids" \
        --max-tokens "$max_tokens" --ignore-eos 2>&1 >/dev/null | tok_s)
  s=$("$bin/tessera" generate --addr "$addr" --token-ids "$ids" \
        --max-tokens "$max_tokens" --ignore-eos 2>&1 >/dev/null | tok_s)
  echo "run $r: offline $o tok/s, served $s tok/s"
  offline+=("$o"); served+=("$s")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mo=$(median "${offline[@]}"); ms=$(median "${served[@]}")
awk -v o="$mo" -v s="$ms" 'BEGIN { printf "median: offline %.1f tok/s, served %.1f tok/s, served/offline = %.3f\n", o, s, s/o }'
