#!/usr/bin/env bash
# Regenerates docs/configuration.md from the binary's own option table (run after adding a flag
# or an environment variable; ConfigurationDocTest fails while the committed file is stale).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build build --target reprise >/dev/null
build/reprise configuration-doc > docs/configuration.md
echo "wrote docs/configuration.md"
