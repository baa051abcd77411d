#!/usr/bin/env bash
# The OpenAI HTTP path's cost against gRPC Generate on the same `tessera serve`: for each API and
# concurrency level, `tessera bench` runs the level and the router process's CPU time (utime +
# stime from /proc) is read around it; prints router CPU per output token and ITL p50.
#   tools/bench/http_vs_grpc.sh [MODEL] [THREADS] [LEVELS] [OUTPUT_TOKENS]
# Results: docs/perf/serving.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/build/bin"
model=${1:-"$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"}
threads=${2:-2}
levels=${3:-"1 64"}
output_tokens=${4:-64}
log=$(mktemp)
"$bin/tessera" serve --model "$model" --port 0 --http-port -1 --threads "$threads" >"$log" 2>/dev/null &
serve_pid=$!
trap 'kill -TERM "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 600); do grep -q "listening on" "$log" && break; sleep 0.2; done
addr=$(sed -n 's/^tessera serve: listening on //p' "$log")
http=$(sed -n 's/^tessera serve: http on //p' "$log")
router_pid=""
for child in $(cat /proc/"$serve_pid"/task/*/children); do
  if grep -q tessera-router /proc/"$child"/cmdline 2>/dev/null; then router_pid=$child; fi
done
[ -n "$router_pid" ] || { echo "no tessera-router child of $serve_pid" >&2; exit 1; }
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' /proc/"$router_pid"/stat; }
printf "%-7s %5s %10s %14s %11s\n" api conc tokens "router us/tok" "itl p50 ms"
for level in $levels; do
  for api in grpc openai; do
    json=$(mktemp)
    before=$(cpu)
    "$bin/tessera" bench --addr "$addr" --api "$api" --http-addr "$http" --concurrency "$level" \
      --num-requests $((level * 4)) --prompt-tokens 64 --output-tokens "$output_tokens" \
      --json "$json" >/dev/null 2>&1
    after=$(cpu)
    python3 - "$json" "$api" "$level" "$before" "$after" "$ticks" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
level = doc["levels"][-1]
cpu_s = (int(sys.argv[5]) - int(sys.argv[4])) / int(sys.argv[6])
tokens = level["output_tokens"]
print(f"{sys.argv[2]:<7} {sys.argv[3]:>5} {tokens:>10} {1e6 * cpu_s / tokens:>14.1f} "
      f"{1e3 * level['itl_s']['p50']:>11.2f}  errors={level['errors']}")
PY
    rm -f "$json"
  done
done
