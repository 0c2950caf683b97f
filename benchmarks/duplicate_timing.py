#!/usr/bin/env python3
"""Device work per run with and without timing duplicates again, side by side in one invocation.

Runs this build's kagent-actors and another build (--compare BINARY, e.g. a checkout before
"duplicates take their original's timing") alternately on the cpu platform with the shipped replay
set, and prints per build: device seconds (summary.json), benchmark steps (device_steps.jsonl), the
duplicates, the best kernel and the run's wall time, with the ratios. Each build reads the harness
of its own checkout (the binary finds its install root from where it lies).

Usage: benchmarks/duplicate_timing.py --compare /tmp/old/build/app/kagent-actors
           [--kernel-dir examples/optimize_01_matvec] [--repeats 2]
"""
import argparse
import json
import os
import pathlib
import sqlite3
import statistics
import subprocess
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def one_run(binary, kernel_dir, out):
    env = dict(os.environ, KAGENT_CACHE_DIR="off")
    t0 = time.perf_counter()
    p = subprocess.run([binary, "--strategy", "cpu", "--kernel-dir", kernel_dir, "--run-dir", out],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{binary} failed (exit {p.returncode}):\n{p.stdout[-2000:]}")
    run = next(pathlib.Path(out).iterdir())
    summary = json.loads((run / "summary.json").read_text())
    benchmarks = 0
    for f in run.glob("candidates/*/device_steps.jsonl"):
        for line in f.read_text().splitlines():
            benchmarks += sum(1 for s in json.loads(line)["steps"] if s.get("op") == "benchmark")
    db = sqlite3.connect(run / "program.db")
    best = summary.get("best_program_id")
    best_code = db.execute("select code from programs where id = ?", (best,)).fetchone()[0] if best else ""
    return {"wall_s": wall, "device_s": summary["device_s"], "benchmarks": benchmarks,
            "duplicates": summary.get("duplicates"), "candidates": summary.get("candidates"), "best": best_code}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compare", required=True, help="the other build's kagent-actors")
    ap.add_argument("--kernel-dir", default=str(ROOT / "examples/optimize_01_matvec"))
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    builds = {"this": str(ROOT / "build/app/kagent-actors"), "other": a.compare}
    rows = {k: [] for k in builds}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.repeats):
            order = list(builds) if i % 2 == 0 else list(reversed(builds))
            for name in order:
                rows[name].append(one_run(builds[name], a.kernel_dir, os.path.join(tmp, f"{name}{i}")))
    med = {k: {m: statistics.median(r[m] for r in v) for m in ("wall_s", "device_s", "benchmarks")}
           for k, v in rows.items()}
    print(f"{'build':<6} {'device_s':>9} {'benchmarks':>10} {'wall_s':>7}  duplicates/candidates per run")
    for k in builds:
        print(f"{k:<6} {med[k]['device_s']:9.1f} {med[k]['benchmarks']:10.0f} {med[k]['wall_s']:7.1f}  "
              + ", ".join(f"{r['duplicates']}/{r['candidates']}" for r in rows[k]))
    print(f"ratio this/other: device_s {med['this']['device_s'] / med['other']['device_s']:.2f}, "
          f"wall {med['this']['wall_s'] / med['other']['wall_s']:.2f}")
    same = {r["best"] for v in rows.values() for r in v}
    print("the same best kernel in every run" if len(same) == 1 else f"bests differ: {len(same)} distinct")


if __name__ == "__main__":
    main()
