#!/usr/bin/env bash
# README command 1: set up, then run the main job: greedy offline generation on the default model
# with its chat template.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
cd "$root"
build/bin/tessera generate --model models/SmolLM2-135M-Instruct.Q4_1.gguf \
  --chat "What is the capital of France?" --max-tokens 64
