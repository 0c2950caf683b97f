#!/usr/bin/env python3
"""A parent's profile with the profiler started before its kernel exists (issue 14: "a parent's
profile <= 3 s"), against the command a run used so far, on the same kernels in one session.

  fresh:   `ncu ... --kernel-name NAME python profile_wrapper.py --kernel K` (a fresh Triton cache),
           timed from its launch to its exit: what a profile cost the device.
  standby: `ncu ... --nvtx --nvtx-include kagent_measured/ python profile_wrapper.py --standby DIR`
           started first; once it wrote DIR/standby.ready (torch, Triton, the problem, the CUDA
           context), the batch is handed over (DIR/batch.json) and timed from there to ncu's exit.
           One kernel, then two in one process (each told apart by its nested kagent_kernel:ID
           range); the CSVs are kept: tests/fakes/fixtures/profiling/ncu_standby_matvec is one.

The metrics of each kernel's measured launch are printed side by side (fresh vs standby), so a change
in what is profiled shows.

    probe_ncu_standby.py --kernel-dir examples/optimize_01_matvec --kernel A.py|A.md:NAME ... --out OUT [--reps 2]
"""
import argparse
import csv
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
from probe_ncu_batch import WRAPPER  # noqa: E402
from probe_ncu_fixed import base  # noqa: E402  (a run's ncu command, before its filter)

KEY_METRICS = ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
               "sm__throughput.avg.pct_of_peak_sustained_elapsed", "launch__registers_per_thread"]


def kernel_file(spec, out, i):
    path, _, name = spec.partition(":")
    path = os.path.abspath(path)
    if path.endswith(".md"):  # a replay reply: its python code block is the kernel
        code = re.search(r"```python\n(.*?)```", open(path).read(), re.S).group(1)
        path = os.path.join(out, f"kernel{i}.py")
        with open(path, "w") as f:
            f.write(code)
    return path, name


def rows_of(csv_path):
    lines = [l for l in open(csv_path) if not l.startswith("==")]
    rows = list(csv.DictReader(lines))
    return [r for r in rows if r.get("ID", "").strip().isdigit()]


def measured(rows, name, range_id=None):
    """The last launch of `name` (inside the kagent_kernel:range_id range when given)."""
    pick = [r for r in rows if r["Kernel Name"].split("(")[0] == name]
    if range_id is not None:
        col = next((c for c in rows[0] if c.startswith("thread Domain:Push/Pop_Range")), None) if rows else None
        pick = [r for r in pick if col and f"kagent_kernel:{range_id}:" in r[col]]
    return pick[-1] if pick else None


def fresh(a, problem, kernel, name, out, tag):
    log = os.path.join(out, f"fresh_{tag}.csv")
    argv = base(a.ncu, log) + ["--kernel-name", name, sys.executable, WRAPPER, "--problem", problem, "--kernel", kernel]
    env = dict(os.environ, TRITON_CACHE_DIR=tempfile.mkdtemp(prefix="cache_", dir=out), KAGENT_PROFILE_TRACE="1")
    t0 = time.time()
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.time() - t0
    open(os.path.join(out, f"fresh_{tag}.txt"), "w").write(" ".join(argv) + "\n\n" + p.stdout)
    return wall, p.returncode, log


def launch_standby(a, problem, out, tag):
    d = os.path.join(out, f"standby_{tag}")
    os.makedirs(d)
    log = os.path.join(d, "standby_ncu.csv")
    argv = base(a.ncu, log) + ["--nvtx", "--nvtx-include", "kagent_measured/", sys.executable, WRAPPER,
                               "--problem", problem, "--standby", d, "--idle-s", "300"]
    env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(d, ".triton_cache"), KAGENT_PROFILE_TRACE="1")
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p, d, log, argv, time.time()


def standby(a, problem, kernels, out, tag, started=None, next_tag=None):
    """One standby's batch; `started`: one launched already. `next_tag`: launch the next standby just
    before the hand-over (two ncu processes at once: the next one starts while this one profiles)."""
    p, d, log, argv, t_launch = started or launch_standby(a, problem, out, tag)
    while not os.path.exists(os.path.join(d, "standby.ready")) and p.poll() is None:
        time.sleep(0.01)
    ready = time.time() - t_launch
    if started is None:
        time.sleep(1.0)  # a profile request comes some time after the standby is ready
    nxt = launch_standby(a, problem, out, next_tag) if next_tag else None
    items = []
    for i, (path, _) in enumerate(kernels):
        dst = os.path.join(d, f"k{i}_kernel.py")
        shutil.copy(path, dst)
        items.append([f"k{i}", dst])
    with open(os.path.join(d, "batch.json.tmp"), "w") as f:
        json.dump({"kernels": items}, f)
    t0 = time.time()
    os.replace(os.path.join(d, "batch.json.tmp"), os.path.join(d, "batch.json"))
    text, _ = p.communicate()
    wall = time.time() - t0
    open(os.path.join(out, f"standby_{tag}.txt"), "w").write(" ".join(argv) + "\n\n" + text)
    if next_tag:
        return ready, wall, p.returncode, log, nxt
    return ready, wall, p.returncode, log


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel-dir", required=True)
    ap.add_argument("--kernel", action="append", required=True, help="PATH:TRITON_KERNEL_NAME (a .md reply works)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--ncu", default=shutil.which("ncu") or "/usr/local/cuda/bin/ncu")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--overlap-only", action="store_true",
                    help="only: a batch handed over while the next standby starts, then that next one's batch at once")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    problem = os.path.join(os.path.abspath(a.kernel_dir), "problem.py")
    kernels = [kernel_file(k, a.out, i) for i, k in enumerate(a.kernel)]
    result = []
    if a.overlap_only:
        for rep in range(a.reps):
            ready, wall, rc, log, nxt = standby(a, problem, kernels[:1], a.out, f"ov_a_r{rep}", next_tag=f"ov_b_r{rep}")
            t_b = time.time()
            ready_b, wall_b, rc_b, log_b = standby(a, problem, kernels[-1:], a.out, f"ov_b_r{rep}", started=nxt)
            rows_a = rows_of(log) if os.path.exists(log) else []
            rows_b = rows_of(log_b) if os.path.exists(log_b) else []
            ma = measured(rows_a, kernels[0][1], "k0")
            mb = measured(rows_b, kernels[-1][1], "k0")
            r = {"mode": "overlap", "rep": rep, "a_wall_s": round(wall, 3), "a_rc": rc, "b_ready_after_a_s": round(ready_b, 3),
                 "b_wall_s": round(wall_b, 3), "b_rc": rc_b, "b_total_from_a_end_s": round(time.time() - t_b, 3),
                 "a_time": ma and ma.get("gpu__time_duration.sum"), "b_time": mb and mb.get("gpu__time_duration.sum")}
            print(json.dumps(r), flush=True)
            result.append(r)
        json.dump(result, open(os.path.join(a.out, "standby_overlap.json"), "w"), indent=1)
        return
    for rep in range(a.reps):
        for i, (path, name) in enumerate(kernels):
            wall, rc, log = fresh(a, problem, path, name, a.out, f"k{i}_r{rep}")
            result.append({"mode": "fresh", "kernel": i, "rep": rep, "wall_s": round(wall, 3), "rc": rc})
            print(f"fresh    k{i} rep {rep}: {wall:6.2f} s rc {rc}", flush=True)
            r = measured(rows_of(log), name) if os.path.exists(log) else None
            result[-1]["metrics"] = {m: r.get(m) for m in KEY_METRICS} if r else None
        for n in (1, len(kernels)) if len(kernels) > 1 else (1,):
            ready, wall, rc, log = standby(a, problem, kernels[:n], a.out, f"n{n}_r{rep}")
            result.append({"mode": "standby", "kernels": n, "rep": rep, "ready_s": round(ready, 3),
                           "wall_s": round(wall, 3), "rc": rc})
            print(f"standby  {n} kernel(s) rep {rep}: ready after {ready:5.2f} s, batch to exit {wall:6.2f} s rc {rc}",
                  flush=True)
            rows = rows_of(log) if os.path.exists(log) else []
            result[-1]["rows"] = len(rows)
            result[-1]["metrics"] = []
            for i, (_, name) in enumerate(kernels[:n]):
                r = measured(rows, name, f"k{i}")
                result[-1]["metrics"].append({m: r.get(m) for m in KEY_METRICS} if r else None)
    for r in result:
        print(json.dumps(r))
    json.dump(result, open(os.path.join(a.out, "standby.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
