"""How the harness's processes started ahead (test_standby.py, profile_wrapper.py --standby) end once
their work is done: without the interpreter's teardown, which frees torch's memory and the CUDA
context one object at a time (0.35-0.46 s on an H100, all of it device time: benchmarks/RESULTS.md,
eleventh session). Stdlib only: it is imported into the process the user's test.py runs in.
"""
import os
import sys


def fast_exit_enabled():
    """KAGENT_FAST_EXIT=0 keeps the interpreter's full teardown; anything else (or unset) ends at once."""
    return os.environ.get("KAGENT_FAST_EXIT", "1") != "0"


def end_now(code):
    """Flushes what Python and C code have buffered for stdout and stderr (os._exit, unlike exit(),
    leaves C's stdio buffers unwritten), then ends the process with `code`, running nothing else."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream has nothing left to write
            pass
    try:
        import ctypes
        ctypes.CDLL(None).fflush(None)
    except Exception:  # noqa: BLE001 - no libc to ask: nothing C-buffered that could be saved
        pass
    os._exit(code)
