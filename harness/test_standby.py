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
"""
import argparse
import os
import sys
import time


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
    test = os.path.abspath(a.test)
    os.chdir(a.dir)
    sys.argv = [test]
    sys.path[0] = os.path.dirname(os.path.realpath(test))
    import runpy
    runpy.run_path(test, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
