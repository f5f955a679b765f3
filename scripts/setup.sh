#!/usr/bin/env bash
# Installs the Debian packages Reprise needs and builds it in Release (warnings are errors).
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  g++ cmake ninja-build pkg-config \
  libssl-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev \
  libgtest-dev libgmock-dev libbenchmark-dev libicu-dev python3 python3-requests python3-jinja2 \
  clang clang-format libclang-rt-14-dev libhiredis-dev redis-server redis-tools >/dev/null
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DREPRISE_WERROR=ON
cmake --build build -j "$(nproc)"
