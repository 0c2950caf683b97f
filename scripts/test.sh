#!/usr/bin/env bash
# Installs what is missing, builds with warnings as errors, and runs the whole test suite (GoogleTest
# through ctest, plus the harness's Python tests). Extra arguments go to ctest (e.g. -L unit, -LE slow).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
./scripts/install-deps.sh
./scripts/setup-python.sh >/dev/null
./scripts/build.sh
cd build
ctest -j"$(nproc 2>/dev/null || echo 2)" --output-on-failure --timeout 600 "$@"
