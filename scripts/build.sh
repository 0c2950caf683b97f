#!/usr/bin/env bash
# Configures and builds kagent-actors in ./build (warnings are errors). Idempotent and incremental.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DKAGENT_WERROR=ON \
  -DKAGENT_PYTHON="$root/.venv/bin/python" >/dev/null
cmake --build build -j"$jobs"
