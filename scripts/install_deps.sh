#!/usr/bin/env bash
# Installs the Debian 12 packages tessera builds and tests with. Idempotent: does nothing when
# every package is already installed. --test-tools adds what only the tests use beyond that
# (headless Chromium and its WebDriver, for the web console's browser test), so README command 1
# does not download a browser.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git python3 python3-pip
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  prometheus-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
  libpcre2-dev libcpp-httplib-dev libspdlog-dev libfmt-dev libcli11-dev
  clang libclang-rt-14-dev libboost-context-dev
  python3-grpcio python3-protobuf python3-matplotlib python3-venv
  prometheus
  patchelf xz-utils binutils
)
if [ "${1:-}" = "--test-tools" ]; then
  packages+=(chromium chromium-driver)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
echo "install_deps: installing ${missing[*]}"
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
