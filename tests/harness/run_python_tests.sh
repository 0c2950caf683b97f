#!/bin/sh
# Runs the harness's Python unittest suite (CPU only, Triton interpreter) with the given interpreter.
# Usage: run_python_tests.sh PYTHON REPO_ROOT. Exits 77 (ctest: skipped) when PYTHON lacks torch/triton.
python="$1"
root="$2"
if ! "$python" -c 'import torch, triton' >/dev/null 2>&1; then
  echo "SKIPPED: '$python' cannot import torch and triton; create the venv with scripts/setup-python.sh" \
       "or configure with -DKAGENT_PYTHON=/path/to/python" >&2
  exit 77
fi
cd "$root" || exit 1
exec env TRITON_INTERPRET=1 "$python" -m unittest discover -s harness/tests -t harness/tests
