#!/usr/bin/env python3
"""Per-profile wall time, before and after, side by side in one run (benchmarks/RESULTS.md).

For each example, takes the exact ncu command line a kagent-actors run recorded for the starting
kernel's baseline profile (its invocations.jsonl) and runs it again twice:
  after  - as recorded: ncu on the runner's launcher of harness/profile_wrapper.py (inputs made on
           the device, minimal imports);
  before - the same ncu options on benchmarks/h200/naive_profile_wrapper.py, which builds the
           profiled program the way the original design does (inputs generated on the host, moved
           and cast, get_init_inputs required).
Runs alternate (before, after, before, after ...) so that drift hits both alike, and the wrappers
are also timed alone, without ncu. Prints a table and writes profile_cost.json into --out.

    profile_cost.py --runs RUNS_DIR:EXAMPLE_DIR [...] --out OUT [--reps 2]
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def recorded_ncu_argv(runs_dir):
    hits = glob.glob(os.path.join(runs_dir, "*", "baseline_profiles", "initial", "profile_*", "invocations.jsonl"))
    if not hits:
        sys.exit(f"no baseline profile record under {runs_dir}")
    rec = json.loads(open(hits[0]).readline())
    return rec["argv"], os.path.dirname(hits[0])


def timed(argv, cwd, env):
    t0 = time.monotonic()
    p = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return time.monotonic() - t0, p.returncode, p.stdout[-2000:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", nargs="+", required=True, help="RUNS_DIR:EXAMPLE_DIR pairs")
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=2)
    a = ap.parse_args()
    results = {}
    for pair in a.runs:
        runs_dir, example = pair.split(":")
        name = os.path.basename(example.rstrip("/"))
        argv, pdir = recorded_ncu_argv(runs_dir)
        # argv = [ncu, options..., python, launcher]; the log file is replaced per run.
        python, launcher = argv[-2], argv[-1]
        opts = argv[1:-2]
        li = opts.index("--log-file")
        naive = [python, os.path.join(HERE, "naive_profile_wrapper.py"), "--problem",
                 os.path.join(example, "problem.py"), "--kernel", os.path.join(example, "input.py")]
        env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(pdir, ".triton_cache_bench"))
        times = {"before_ncu": [], "after_ncu": [], "before_alone": [], "after_alone": []}
        tails = {}
        for rep in range(a.reps):
            for label, prog in (("before", naive), ("after", [python, launcher])):
                log = os.path.join(a.out, f"{name}_{label}_{rep}.csv")
                o = list(opts)
                o[li + 1] = log
                t, rc, tail = timed([argv[0]] + o + prog, pdir, env)
                times[label + "_ncu"].append(t)
                tails[f"{label}_ncu_{rep}"] = {"rc": rc, "tail": tail[-600:]}
                t, rc, tail = timed(prog, pdir, env)
                times[label + "_alone"].append(t)
                tails[f"{label}_alone_{rep}"] = {"rc": rc, "tail": tail[-600:]}
        med = {k: statistics.median(v) for k, v in times.items()}
        results[name] = {"times_s": times, "median_s": med, "ratio_ncu": med["before_ncu"] / med["after_ncu"],
                         "ratio_alone": med["before_alone"] / med["after_alone"], "runs": tails}
        print(f"{name}: ncu before {med['before_ncu']:.1f} s, after {med['after_ncu']:.1f} s "
              f"({results[name]['ratio_ncu']:.2f}x); wrapper alone before {med['before_alone']:.1f} s, "
              f"after {med['after_alone']:.1f} s ({results[name]['ratio_alone']:.2f}x)")
    with open(os.path.join(a.out, "profile_cost.json"), "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
