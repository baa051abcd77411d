#!/usr/bin/env bash
# One-time (idempotent) setup: Debian packages, the default model, and the build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install_deps.sh"
"$root/scripts/fetch_model.sh"
"$root/scripts/fetch_xgrammar.sh"
"$root/scripts/build.sh" "$@"
