#!/usr/bin/env python3
"""Where a test.py run's seconds go (issue 14: test.py for a new best cost 8-9 s of device time on an
H100): a fresh interpreter's start, torch, Triton, the CUDA context, then the kernel directory's
test.py itself with the starting kernel as kernel.py, from a cold and from a warm Triton cache.
Prints one line per step: what, the median wall time of --reps runs, the exit status of the last.

    probe_user_test.py [--kernel-dir examples/optimize_01_matvec] [--reps 3]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel-dir", default="examples/optimize_01_matvec")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    kdir = os.path.abspath(a.kernel_dir)
    py = sys.executable
    work = tempfile.mkdtemp()
    shutil.copy(os.path.join(kdir, "input.py"), os.path.join(work, "kernel.py"))
    env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(work, "triton"))
    steps = [
        ("python", [py, "-c", "pass"], False),
        ("import_torch", [py, "-c", "import torch"], False),
        ("import_torch_triton", [py, "-c", "import torch, triton"], False),
        ("cuda_context", [py, "-c", "import torch, triton; torch.empty(1, device='cuda'); torch.cuda.synchronize()"], False),
        ("test_py_cold_cache", [py, os.path.join(kdir, "test.py")], True),
        ("test_py_warm_cache", [py, os.path.join(kdir, "test.py")], False),
    ]
    for what, argv, cold in steps:
        xs, rc = [], None
        for _ in range(a.reps):
            if cold:
                shutil.rmtree(os.path.join(work, "triton"), ignore_errors=True)
            t0 = time.perf_counter()
            rc = subprocess.run(argv, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
            xs.append(time.perf_counter() - t0)
        print(f"{what} {statistics.median(xs):.3f} s rc={rc} (runs: {', '.join(f'{x:.2f}' for x in xs)})", flush=True)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
