#!/usr/bin/env bash
# Creates .venv with the harness's only dependencies (torch, triton, numpy) from PyPI. Idempotent:
# an existing venv that imports all three is kept. Prints the interpreter path on the last line.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
py="$venv/bin/python"
if [ -x "$py" ] && "$py" -c 'import torch, triton, numpy' >/dev/null 2>&1; then
  echo "$py"; exit 0
fi
python3 -m venv "$venv"
"$py" -m pip install -q --upgrade pip >&2
"$py" -m pip install -q -r "$root/harness/requirements.txt" >&2
"$py" -c 'import torch, triton, numpy' >&2
echo "$py"
