#!/usr/bin/env bash
# Fetches xgrammar's source distribution from PyPI into third_party/ (git-ignored) and checks its
# sha256; cmake/Xgrammar.cmake builds its C++ core (grammar compiler and matcher) from there as a
# static library. Only the sdist is needed, never the wheel (which would build the Python
# bindings). Skips everything when a verified copy is already unpacked.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=0.2.8
sha256=8305646fd2b319d6c3003f51a1665e54cbbe9cba1fb636bc41d0b46434ccbb80
dest="$root/third_party/xgrammar-$version"
stamp="$dest/.tessera-sha256"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sha256" ]; then
  echo "fetch_xgrammar: $dest present (sha256 ok)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch_xgrammar: downloading xgrammar $version (sdist) from PyPI"
# The sdist's address comes from PyPI's JSON API (pip download would build the package's
# metadata, i.e. its Python bindings, just to download it).
python3 - "$version" "$tmp/xgrammar.tar.gz" <<'PY'
import json, sys, urllib.parse, urllib.request
version, out = sys.argv[1:]
api = "https://pypi.org/pypi/xgrammar/json"
with urllib.request.urlopen(api, timeout=120) as response:
    files = json.load(response)["releases"].get(version, [])
sdists = [f for f in files if f["packagetype"] == "sdist"]
if len(sdists) != 1:
    sys.exit(f"fetch_xgrammar: expected one sdist of xgrammar {version}, found {len(sdists)}")
url = urllib.parse.urljoin(api, sdists[0]["url"])
with urllib.request.urlopen(url, timeout=300) as response, open(out, "wb") as dst:
    dst.write(response.read())
PY
if ! echo "$sha256  $tmp/xgrammar.tar.gz" | sha256sum --check --status; then
  echo "fetch_xgrammar: sha256 mismatch for xgrammar-$version.tar.gz (expected $sha256)" >&2
  exit 1
fi
mkdir -p "$root/third_party"
rm -rf "$dest"
tar -xzf "$tmp/xgrammar.tar.gz" -C "$root/third_party"
echo "$sha256" > "$stamp"
echo "fetch_xgrammar: unpacked $dest"
