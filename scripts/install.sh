#!/usr/bin/env bash
# Puts kagent-actors on PATH: builds (scripts/build.sh), installs the binary into PREFIX/bin and its
# configs, templates and harness into PREFIX/share/kagent-actors, and links the project's Python
# environment (.venv, from scripts/setup-python.sh) there so that the installed binary finds torch
# and triton. PREFIX defaults to ~/.local (whose bin/ is on PATH in most shells).
#   ./scripts/install.sh [PREFIX]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:-$HOME/.local}
cd "$root"
./scripts/install-deps.sh
./scripts/setup-python.sh >/dev/null
./scripts/build.sh
cmake --install build --prefix "$prefix" >/dev/null
ln -sfn "$root/.venv" "$prefix/share/kagent-actors/.venv"
echo "installed $prefix/bin/kagent-actors (configs, templates, harness in $prefix/share/kagent-actors)"
case ":$PATH:" in
  *":$prefix/bin:"*) ;;
  *) echo "add it to PATH: export PATH=\"$prefix/bin:\$PATH\"" ;;
esac
