#!/usr/bin/env bash
# Python packages the tests need beyond Debian's (PyPI, pinned): the real `openai` client for the
# e2e tests, `selenium` (drives Debian's headless Chromium in web_console_test) and `gguf`
# (ggml-org's gguf-py, the MXFP4/NVFP4 oracle of gguf_test), installed into
# the git-ignored virtual environment .venv-e2e/. It is made from Debian's
# /usr/bin/python3 with --system-site-packages, so it also sees python3-grpcio. Idempotent: does
# nothing when the pinned versions are already there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv-e2e"
requirements=("openai==3.51.0" "gguf==0.19.0" "selenium==4.51.0")
if [ -x "$venv/bin/python" ] && "$venv/bin/python" - "${requirements[@]}" <<'PY'
import sys
from importlib.metadata import version, PackageNotFoundError
for pin in sys.argv[1:]:
    name, wanted = pin.split("==")
    try:
        if version(name) != wanted:
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
PY
then
  echo "install_python_test_deps.sh: ${requirements[*]} already in $venv"
  exit 0
fi
/usr/bin/python3 -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${requirements[@]}"
echo "install_python_test_deps.sh: installed ${requirements[*]} into $venv"
