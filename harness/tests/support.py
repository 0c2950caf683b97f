"""Shared set-up of the harness tests: CPU platform (Triton interpreter), small problem shapes."""
import os
import sys

# Before anything imports triton: the tests run on the CPU through the interpreter.
os.environ["TRITON_INTERPRET"] = "1"
os.environ["KAGENT_PROBLEM_SIZE"] = "small"

HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(HARNESS)
EXAMPLES = os.path.join(ROOT, "examples")
MATVEC = os.path.join(EXAMPLES, "optimize_01_matvec")
RMSNORM = os.path.join(EXAMPLES, "optimize_02_rmsnorm")
if HARNESS not in sys.path:
    sys.path.insert(0, HARNESS)

import harness_core as core  # noqa: E402

_problems = {}


def problem(directory):
    """The problem of an example directory on the CPU in bf16, loaded once per test process."""
    if directory not in _problems:
        _problems[directory] = core.Problem(os.path.join(directory, "problem.py"), "cpu", "bfloat16", "small")
    return _problems[directory]


def write(tmpdir, name, code):
    path = os.path.join(tmpdir, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(code)
    return path


def candidate(tmpdir, code, name="kernel.py"):
    path = write(tmpdir, name, code)
    return core.load_candidate(path, code)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()
