#!/usr/bin/env bash
# README command 1: set up, then run the main job: `tessera serve` starts tessera-worker and
# tessera-router on the default model, and `tessera generate --addr` streams the answer to
# "What is the capital of France?" (chat template, greedy) through the public Generate API.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# Only the binaries the main job runs (the test targets are built by README command 2), and
# without a visible GPU no GPU code: the main job then runs on the CPU, and nvcc (with, where no
# toolkit is installed, 720 MB of PyPI's CUDA wheels) would only cost minutes. Command 2 builds
# everything, the CUDA backend included.
cuda=()
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then cuda=(-DTESSERA_CUDA=OFF); fi
TESSERA_BUILD_TARGETS="tessera tessera-worker tessera-router" "$root/scripts/setup.sh" "${cuda[@]}"
cd "$root"

port=${TESSERA_PORT:-8000}
log=$(mktemp -t tessera-serve.XXXXXX)
build/bin/tessera serve --model models/SmolLM2-135M-Instruct.Q4_1.gguf --port "$port" >"$log" 2>&1 &
serve_pid=$!
trap 'kill -TERM "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true' EXIT

for _ in $(seq 1 240); do
  if grep -q "tessera serve: listening on" "$log"; then break; fi
  if ! kill -0 "$serve_pid" 2>/dev/null; then cat "$log" >&2; exit 1; fi
  sleep 0.5
done
grep "tessera serve: listening on" "$log" || { cat "$log" >&2; exit 1; }

build/bin/tessera generate --addr "127.0.0.1:$port" --chat "What is the capital of France?" \
  --max-tokens 64
echo
