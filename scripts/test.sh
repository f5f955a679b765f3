#!/usr/bin/env bash
# Runs the whole test suite under ctest (tests needing ../shared/fixtures skip without it).
set -euo pipefail
cd "$(dirname "$0")/.."
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
