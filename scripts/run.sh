#!/usr/bin/env bash
# README command 1: set up, then run the main job on the default model.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
cd "$root"
build/bin/tessera inspect models/SmolLM2-135M-Instruct.Q4_1.gguf
