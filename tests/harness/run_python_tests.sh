#!/bin/sh
# Runs the harness's Python unittest suite (CPU only, Triton interpreter) with the given interpreter,
# or the part of it named by the further arguments (see python_part.py: unittest names, then
# optionally --except and names to leave out).
# Usage: run_python_tests.sh PYTHON REPO_ROOT [NAME... [--except NAME...]]. Exits 77 (ctest: skipped) when PYTHON lacks
# torch/triton.
python="$1"
root="$2"
shift 2
if ! "$python" -c 'import torch, triton' >/dev/null 2>&1; then
  echo "SKIPPED: '$python' cannot import torch and triton; create the venv with scripts/setup-python.sh" \
       "or configure with -DKAGENT_PYTHON=/path/to/python" >&2
  exit 77
fi
cd "$root/harness/tests" || exit 1
if [ $# -eq 0 ]; then
  exec env TRITON_INTERPRET=1 "$python" -m unittest discover -s . -t .
fi
exec env TRITON_INTERPRET=1 "$python" "$root/tests/harness/python_part.py" "$@"
