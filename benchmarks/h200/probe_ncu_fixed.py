#!/usr/bin/env python3
"""Where one ncu process's fixed cost goes (issue 14: "a parent's profile <= 3 s"), for one kernel:
the wrapper's own phases (KAGENT_PROFILE_TRACE=1 timestamps: interpreter start, torch import, problem
and inputs, the first call that compiles, warm-ups, the measured call) against the process's wall
time, with and without ncu, with a fresh Triton cache (what a run's profile has: its own directory)
and a warm one, and with ncu's --target-processes application-only (SPEC's command says all: Triton's
compiler children, ptxas and gcc, are then injected too).

    probe_ncu_fixed.py --kernel-dir examples/optimize_01_matvec --kernel K.py|REPLY.md --name matvec_kernel --out OUT [--reps 2]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from probe_ncu_batch import WRAPPER, metric_list  # noqa: E402


def base(ncu, log, targets="all", metrics=None):
    return [ncu, "--csv", "--page", "raw", "--print-units", "base", "--kernel-name-base", "demangled",
            "--target-processes", targets, "--replay-mode", "kernel", "--profile-from-start", "on",
            "--log-file", log, "--metrics", ",".join(metrics or metric_list())]


def run(argv, cache, out_txt):
    env = dict(os.environ, KAGENT_PROFILE_TRACE="1", TRITON_CACHE_DIR=cache)
    t0 = time.time()
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.time() - t0
    with open(out_txt, "w") as f:
        f.write(" ".join(argv) + "\n\n" + p.stdout)
    phases = {m.group(2): round(float(m.group(1)) - t0, 3)
              for m in re.finditer(r"\[profile_wrapper (\d+\.\d+)\] (.+)", p.stdout)}
    return {"wall_s": round(wall, 3), "rc": p.returncode, "phases": phases}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel-dir", required=True)
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--name", default="")
    ap.add_argument("--out", required=True)
    ap.add_argument("--ncu", default=shutil.which("ncu") or "/usr/local/cuda/bin/ncu")
    ap.add_argument("--reps", type=int, default=2)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    problem = os.path.join(os.path.abspath(a.kernel_dir), "problem.py")
    kernel = os.path.abspath(a.kernel)
    if kernel.endswith(".md"):  # a replay reply: its python code block is the kernel
        code = re.search(r"```python\n(.*?)```", open(kernel).read(), re.S).group(1)
        kernel = os.path.join(a.out, "kernel.py")
        with open(kernel, "w") as f:
            f.write(code)
    app = [sys.executable, WRAPPER, "--problem", problem, "--kernel", kernel]
    filt = ["--kernel-name", a.name] if a.name else []
    warm = os.path.join(a.out, "warm_cache")
    rows = []
    for rep in range(a.reps):
        fresh = lambda: tempfile.mkdtemp(prefix="cache_", dir=a.out)  # noqa: E731
        log = lambda n: os.path.join(a.out, f"{n}_r{rep}.csv")  # noqa: E731
        plan = [
            ("wrapper, fresh cache", app, fresh()),
            ("wrapper, warm cache", app, warm),
            ("ncu (a run's command), fresh cache", base(a.ncu, log("ncu_fresh")) + filt + app, fresh()),
            ("ncu, warm cache", base(a.ncu, log("ncu_warm")) + filt + app, warm),
            ("ncu application-only, fresh cache", base(a.ncu, log("ncu_app"), "application-only") + filt + app, fresh()),
            # What a profiler process started before its kernels are known would need: no name filter,
            # only the launches inside the wrapper's NVTX range of the measured call.
            ("ncu nvtx-include, fresh cache", base(a.ncu, log("ncu_nvtx")) + ["--nvtx", "--nvtx-include",
                                                                            "kagent_measured/"] + app, fresh()),
            ("ncu, warm cache, 1 metric", base(a.ncu, log("ncu_1m"), metrics=["gpu__time_duration.sum"]) + filt + app, warm),
        ]
        for name, argv, cache in plan:
            r = run(argv, cache, os.path.join(a.out, f"{re.sub(r'[^a-z0-9]+', '_', name)}_r{rep}.txt"))
            r.update(name=name, rep=rep)
            rows.append(r)
            ph = r["phases"]
            print(f"{name:38s} rep {rep} wall {r['wall_s']:6.2f} s rc {r['rc']}  "
                  + "  ".join(f"{k} {v:.2f}" for k, v in ph.items()), flush=True)
    json.dump(rows, open(os.path.join(a.out, "fixed.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
