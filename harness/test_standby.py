"""A test.py process started before its kernel exists (issue 14: test.py for a new best cost 8-9 s of
device time on an H100, most of it a new interpreter importing torch and Triton).

    python test_standby.py --dir DIR --test TEST [--idle-s S] [--launchers SHARED]

Imports torch and Triton and prepares Triton host-side (launchers.prepare_triton: the driver's
utilities, a compile of a harness kernel for the capability NVML reports, and with --launchers the
judge's read-only shared launcher directory looked up first, as a worker does), then waits for
DIR/go (the kernel is in DIR/kernel.py by then) and runs
TEST as `python TEST` would in DIR: sys.argv is [TEST], sys.path[0] is TEST's directory, the script
runs as __main__, and its exit status is the process's. It runs once and exits, so no candidate
shares a process with another. Nothing runs on the device before the test does, and CUDA is not
even initialised: a compile through Triton's JIT created a context of 518 MiB in every waiting
standby on an H100, and a CUDA initialised before the test would keep a test.py that forks from
using CUDA in its children (as `torch.cuda.is_available()` would). With no go within
--idle-s seconds it exits 75 ("standby: no test came").

After the test, its exit status stands as `python TEST` would give it (SystemExit's code, 1 and a
traceback for an uncaught exception), its atexit handlers run, and the process ends with os._exit:
the interpreter's teardown of torch and the CUDA context (measured in benchmarks/RESULTS.md) is
skipped. KAGENT_FAST_EXIT=0 keeps the full teardown.
"""
import argparse
import os
import sys
import time

import process_end  # this directory's, stdlib only


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--test", required=True)
    ap.add_argument("--idle-s", type=float, default=1800.0)
    ap.add_argument("--launchers", default=None)
    a = ap.parse_args()
    import torch  # noqa: F401 - what every test.py of a kernel directory pays for first
    import triton  # noqa: F401
    import launchers  # this directory's (sys.path[0] until the test's own directory replaces it)
    launchers.prepare_triton(a.launchers, compile_probe=True)
    go = os.path.join(a.dir, "go")
    deadline = time.monotonic() + a.idle_s
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            print("standby: no test came", file=sys.stderr)
            return 75
        time.sleep(0.01)
    import privileges  # this directory's, stdlib only
    privileges.drop_all()  # before any code of the test or the candidate runs here
    test = os.path.abspath(a.test)
    os.chdir(a.dir)
    sys.argv = [test]
    sys.path[0] = os.path.dirname(os.path.realpath(test))
    import runpy
    # The test's outcome is its exit status, as `python test.py` would have it.
    try:
        runpy.run_path(test, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exit_status(exc.code)
    except BaseException:  # noqa: BLE001 - as the interpreter reports an uncaught exception
        import traceback
        traceback.print_exc()
        code = 1
    mark("test done")
    if process_end.fast_exit_enabled():
        leave(code)
    return code  # the interpreter's full exit (KAGENT_FAST_EXIT=0)


def exit_status(code):
    """What the interpreter makes of SystemExit(code): None is 0, an int is itself, anything else
    is printed to stderr and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF  # as the OS keeps it
    print(code, file=sys.stderr)
    return 1


def mark(what):
    """KAGENT_TEST_TRACE=1: the wall-clock time of a phase on stderr (benchmarks/h200/probe_exit.py)."""
    if os.environ.get("KAGENT_TEST_TRACE") == "1":
        print(f"[test_standby {time.time():.3f}] {what}", file=sys.stderr, flush=True)


def leave(code):
    """Ends the process as the interpreter would, less its teardown: the test's other threads joined
    (daemon threads are not), its atexit handlers run, then process_end.end_now."""
    import atexit
    import threading
    for t in threading.enumerate():
        if t is not threading.current_thread() and not t.daemon:
            t.join()
    atexit._run_exitfuncs()
    mark("atexit done")
    process_end.end_now(code)


if __name__ == "__main__":
    sys.exit(main())
