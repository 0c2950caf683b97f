#!/usr/bin/env python3
"""What a process's exit costs the device after its work is done (issue 14), with and without the
fast exit of the harness's two standbys (KAGENT_FAST_EXIT=0 keeps the interpreter's teardown):

  ncu:     a profile through ncu's standby (probe_ncu_standby.standby: the batch handed over, timed
           to ncu's exit), the wrapper's own stamps (KAGENT_PROFILE_TRACE=1) telling `batch done`
           apart; the key metrics of the measured launch are printed for both, so a report the fast
           exit cut short shows.
  test.py: harness/test_standby.py with the kernel directory's test.py and the starting kernel,
           started, given 8 s to import, then `go`: the seconds to the test's last line (PASS), to
           its atexit handlers, and to the process's exit.

Variants alternate within each rep. One JSON line per measurement, then medians.

    probe_exit.py --kernel-dir examples/optimize_01_matvec --kernel PATH:TRITON_NAME --out OUT [--reps 3]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from probe_ncu_standby import KEY_METRICS, kernel_file, measured, rows_of, standby  # noqa: E402


def stamps(text, who):
    return {m.group(2): float(m.group(1)) for m in re.finditer(rf"\[{who} (\d+\.\d+)\] (.+)", text)}


def one_profile(a, problem, kernel, out, tag, fast):
    os.environ["KAGENT_FAST_EXIT"] = "1" if fast else "0"
    t_before = time.time()
    ready, wall, rc, log = standby(a, problem, [kernel], out, tag)
    t_exit = time.time()
    text = open(os.path.join(out, f"standby_{tag}.txt")).read()
    st = stamps(text, "profile_wrapper")
    done = st.get("batch done")
    rows = rows_of(log) if os.path.exists(log) else []
    m = measured(rows, kernel[1], "k0")
    return {"what": "ncu", "fast": fast, "tag": tag, "rc": rc, "handover_to_exit_s": round(wall, 3),
            "batch_done_to_exit_s": round(t_exit - done, 3) if done and done > t_before else None,
            "rows": len(rows), "metrics": {k: m.get(k) for k in KEY_METRICS} if m else None}


def one_test(a, kdir, out, tag, fast):
    d = os.path.join(out, f"test_{tag}")
    os.makedirs(os.path.join(d, "tmp"))
    shutil.copy(os.path.join(kdir, "input.py"), os.path.join(d, "kernel.py"))
    env = dict(os.environ, KAGENT_FAST_EXIT="1" if fast else "0", KAGENT_TEST_TRACE="1",
               TRITON_CACHE_DIR=os.path.join(d, "triton"), TMPDIR=os.path.join(d, "tmp"))
    argv = [sys.executable, os.path.join(ROOT, "harness", "test_standby.py"), "--dir", d, "--test",
            os.path.join(kdir, "test.py"), "--idle-s", "120"]
    p = subprocess.Popen(argv, env=env, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    time.sleep(8)  # torch, Triton and the launcher probe: a test comes long after the standby is ready
    t0 = time.time()
    open(os.path.join(d, "go"), "w").close()
    last_line_t = None
    lines = []
    for line in p.stdout:
        lines.append(line)
        if not line.startswith("[test_standby"):
            last_line_t = time.time()
    p.wait()
    t_exit = time.time()
    text = "".join(lines)
    open(os.path.join(out, f"test_{tag}.txt"), "w").write(text)
    st = stamps(text, "test_standby")
    return {"what": "test.py", "fast": fast, "tag": tag, "rc": p.returncode, "passed": "PASS" in text,
            "go_to_exit_s": round(t_exit - t0, 3),
            "go_to_last_line_s": round(last_line_t - t0, 3) if last_line_t else None,
            "test_done_to_exit_s": round(t_exit - st["test done"], 3) if "test done" in st else None,
            "atexit_s": round(st["atexit done"] - st["test done"], 3) if {"test done", "atexit done"} <= st.keys() else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel-dir", required=True)
    ap.add_argument("--kernel", required=True, help="PATH:TRITON_KERNEL_NAME (a .md reply works)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--ncu", default=shutil.which("ncu") or "/usr/local/cuda/bin/ncu")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", choices=["ncu", "test"], default=None)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    kdir = os.path.abspath(a.kernel_dir)
    problem = os.path.join(kdir, "problem.py")
    kernel = kernel_file(a.kernel, a.out, 0)
    results = []
    for rep in range(a.reps):
        order = (False, True) if rep % 2 == 0 else (True, False)
        for fast in order:
            tag = f"{'fast' if fast else 'full'}_r{rep}"
            if a.only != "test":
                results.append(one_profile(a, problem, kernel, a.out, "ncu_" + tag, fast))
                print(json.dumps(results[-1]), flush=True)
            if a.only != "ncu":
                results.append(one_test(a, kdir, a.out, tag, fast))
                print(json.dumps(results[-1]), flush=True)
    for what, key in (("ncu", "handover_to_exit_s"), ("ncu", "batch_done_to_exit_s"), ("test.py", "go_to_exit_s"),
                      ("test.py", "test_done_to_exit_s")):
        for fast in (False, True):
            v = [r[key] for r in results if r["what"] == what and r["fast"] == fast and r.get(key) is not None]
            if v:
                print(f"{what:8s} {key:22s} {'fast' if fast else 'full'}: median {statistics.median(v):.3f} s "
                      f"over {len(v)} ({', '.join(f'{x:.3f}' for x in v)})")
    json.dump(results, open(os.path.join(a.out, "exit.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
