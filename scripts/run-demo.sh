#!/usr/bin/env bash
# The main job on a machine without a GPU, network or API key: installs what is missing, builds, and
# runs the cpu strategy (real verification and timing in Triton's interpreter, replayed LLM replies)
# on examples/optimize_01_matvec. Extra arguments go to kagent-actors (e.g. --kernel-dir ...).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
./scripts/install-deps.sh
./scripts/setup-python.sh >/dev/null
./scripts/build.sh
if [ $# -eq 0 ]; then set -- --strategy cpu --kernel-dir examples/optimize_01_matvec; fi
exec ./build/app/kagent-actors "$@"
