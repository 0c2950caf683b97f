#!/usr/bin/env python3
"""What one ncu process costs per kernel when several kernels share it (issue 14, item 2), and the raw
CSV that batch attribution is parsed from (captured into tests/fixtures/ncu_batch/).

    probe_ncu_batch.py --kernel-dir examples/optimize_01_matvec --kernels K1 K2 ... --out OUT [--ncu ncu]

Runs, alternating so that drift hits all alike (each line twice):
  wrapper_1 / wrapper_N   harness/profile_wrapper.py alone, one kernel / the batch (no ncu): the fixed cost
  single_<i>              the command kagent-actors runs today for kernel i (kernel-name filter, every launch)
  batch_N                 one ncu on the batch: --nvtx --nvtx-include kagent_measured/ (measured calls only)
  batch_N_rename          the same with --print-nvtx-rename kernel (kernel names become the innermost range)
  batch_N_marker          --kernel-name regex:^(kagent_batch_marker|<names>)$: every launch of the batch's
                          kernels and their markers (what kagent-actors runs; attribution by marker)
  batch_2_nofilter        --nvtx without a range filter (every launch; do NVTX columns appear?)
  batch_2_nested          --nvtx-include kagent_measured/*/ (the nested range form)
and keeps every CSV. Prints a table of wall times and writes probe.json.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WRAPPER = os.path.join(ROOT, "harness", "profile_wrapper.py")


def metric_list():
    src = open(os.path.join(ROOT, "platform", "nvidia", "ncu_plan.cpp")).read()
    body = src[src.index("static const std::vector<std::string> list{"):]
    body = body[:body.index("};")]
    return [line.strip().strip('",') for line in body.splitlines()[1:] if line.strip().startswith('"')]


def ncu_base(ncu, log):
    return [ncu, "--csv", "--page", "raw", "--print-units", "base", "--kernel-name-base", "demangled",
            "--target-processes", "all", "--replay-mode", "kernel", "--profile-from-start", "on",
            "--log-file", log, "--metrics", ",".join(metric_list())]


def timed(argv, env, out_txt):
    t0 = time.monotonic()
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.monotonic() - t0
    with open(out_txt, "w") as f:
        f.write(" ".join(argv) + "\n\n" + p.stdout)
    return round(wall, 3), p.returncode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel-dir", required=True)
    ap.add_argument("--kernels", nargs="+", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ncu", default=shutil.which("ncu") or "/usr/local/cuda/bin/ncu")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--names", nargs="*", default=[], help="Triton kernel name of each kernel (single runs' filter)")
    ap.add_argument("--only", nargs="*", default=[], help="run only these plan entries (e.g. wrapper_1 single_0 batch_2_marker)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    env = dict(os.environ)
    env["TRITON_CACHE_DIR"] = os.path.join(args.out, ".triton_cache")
    problem = os.path.join(os.path.abspath(args.kernel_dir), "problem.py")
    py = sys.executable
    ks = [os.path.abspath(k) for k in args.kernels]
    batch_args = []
    for i, k in enumerate(ks):
        batch_args += ["--batch", f"k{i}={k}"]
    ver = subprocess.run([args.ncu, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    runs = []
    for rep in range(args.reps):
        plan = [
            ("wrapper_1", [py, WRAPPER, "--problem", problem, "--kernel", ks[0]]),
            (f"wrapper_{len(ks)}", [py, WRAPPER, "--problem", problem] + batch_args),
        ]
        for i, k in enumerate(ks):
            log = os.path.join(args.out, f"single_{i}_r{rep}.csv")
            filt = ["--kernel-name", args.names[i]] if i < len(args.names) and args.names[i] else []
            plan.append((f"single_{i}", ncu_base(args.ncu, log) + filt + [py, WRAPPER, "--problem", problem, "--kernel", k]))
        for n in sorted({2, len(ks)}):
            sub = batch_args[: 2 * n]
            log = os.path.join(args.out, f"batch_{n}_r{rep}.csv")
            plan.append((f"batch_{n}", ncu_base(args.ncu, log) + ["--nvtx", "--nvtx-include", "kagent_measured/"]
                         + [py, WRAPPER, "--problem", problem] + sub))
            log = os.path.join(args.out, f"batch_{n}_rename_r{rep}.csv")
            plan.append((f"batch_{n}_rename", ncu_base(args.ncu, log) + ["--nvtx", "--nvtx-include", "kagent_measured/",
                         "--print-nvtx-rename", "kernel"] + [py, WRAPPER, "--problem", problem] + sub))
        names = sorted({n for n in args.names if n})
        for n in sorted({2, len(ks)}):
            log = os.path.join(args.out, f"batch_{n}_marker_r{rep}.csv")
            flt = "regex:^(kagent_batch_marker|" + "|".join(names) + ")$"
            plan.append((f"batch_{n}_marker", ncu_base(args.ncu, log) + ["--kernel-name", flt]
                         + [py, WRAPPER, "--problem", problem] + batch_args[: 2 * n]))
        log = os.path.join(args.out, f"batch_2_nofilter_r{rep}.csv")
        plan.append(("batch_2_nofilter", ncu_base(args.ncu, log) + ["--nvtx"] + [py, WRAPPER, "--problem", problem]
                     + batch_args[:4]))
        log = os.path.join(args.out, f"batch_2_nested_r{rep}.csv")
        plan.append(("batch_2_nested", ncu_base(args.ncu, log) + ["--nvtx", "--nvtx-include", "kagent_measured/*/"]
                     + [py, WRAPPER, "--problem", problem] + batch_args[:4]))
        if args.only:
            plan = [(name, argv) for name, argv in plan if name in args.only]
        for name, argv in plan:
            wall, rc = timed(argv, env, os.path.join(args.out, f"{name}_r{rep}.txt"))
            runs.append({"name": name, "rep": rep, "wall_s": wall, "rc": rc})
            print(f"{name:24s} rep {rep}  {wall:7.2f} s  rc {rc}", flush=True)
    by = {}
    for r in runs:
        by.setdefault(r["name"], []).append(r["wall_s"])
    print("\nname                      min wall s")
    for name, walls in by.items():
        print(f"{name:24s}  {min(walls):7.2f}")
    json.dump({"ncu_version": ver.strip(), "runs": runs, "kernels": ks}, open(os.path.join(args.out, "probe.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
