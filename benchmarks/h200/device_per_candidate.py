#!/usr/bin/env python3
"""Issue 14's comparison on one GPU, side by side in one session: device seconds per candidate of
kagent-actors (a whole beam search, amortized) against the KernelAgent design's per-candidate
pipeline on the same kernels, and candidates per GPU-hour behind a slow LLM.

    device_per_candidate.py --binary .device/kagent-actors --config benchmarks/h200/nvidia_matvec.yaml \
        --kernel-dir examples/optimize_01_matvec --candidates benchmarks/h200/replay_matvec --out OUT \
        [--design-limit 3] [--delay 20]

1. ours: `kagent-actors --strategy CONFIG` (a replay LLM serving --candidates' kernels, real
   verification, benchmarks, test.py and ncu); device seconds per candidate = summary.json's
   device_s / candidates (every device step of the run: the starting kernel, references, profiles,
   the final profile, included).
2. the KernelAgent design, per candidate, for up to --design-limit of the same kernels: a fresh
   `python test.py` with the candidate as kernel.py, a fresh benchmark process (harness/run_once.py
   --cold), and a fresh ncu profile (harness/profile_wrapper.py under ncu, the same metrics), one
   after the other, as its workers do for every candidate.
3. with --delay S: ours again with KAGENT_REPLAY_DELAY_S=S (GPU busy %, candidates per hour), and
   the design's bound at that latency: 4 workers, each an LLM call then a GPU job, on one GPU:
   min(4 / (S + device_s), 1 / device_s) candidates per second.
Prints a table with the ratios and writes per_candidate.json into --out.
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]


def extract(md):
    blocks = re.findall(r"```python\n(.*?)```", md, re.S)
    return max(blocks, key=len) if blocks else md


def kernels_of(candidates_dir, limit):
    out = []
    for p in sorted(pathlib.Path(candidates_dir).glob("optimize_*.md")):
        code = extract(p.read_text())
        if "kernel_function" in code and "@triton.jit" in code:
            out.append((p.stem, code))
    return out[:limit]


def timed(argv, cwd=None, env=None, timeout=900):
    t0 = time.monotonic()
    p = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    return time.monotonic() - t0, p.returncode, p.stdout[-1500:]


def metric_list():
    src = (ROOT / "platform" / "nvidia" / "ncu_plan.cpp").read_text()
    body = src[src.index("static const std::vector<std::string> list{"):]
    body = body[:body.index("};")]
    return [l.strip().strip('",') for l in body.splitlines()[1:] if l.strip().startswith('"')]


def kernel_name(code):
    m = re.search(r"@triton\.jit[^\n]*\ndef (\w+)", code)
    return m.group(1) if m else ""


def design_candidate(kernel_dir, name, code, work, ncu):
    """One candidate the KernelAgent way: fresh test.py, fresh benchmark, fresh ncu."""
    d = work / name
    shutil.copytree(kernel_dir, d, ignore=shutil.ignore_patterns("replay", "__pycache__"))
    (d / "kernel.py").write_text(code)
    env = dict(os.environ, TRITON_CACHE_DIR=str(d / ".triton_cache"))
    row = {"kernel": name}
    row["test_s"], row["test_rc"], _ = timed([sys.executable, "test.py"], cwd=d, env=env)
    row["bench_s"], row["bench_rc"], _ = timed([sys.executable, str(ROOT / "harness" / "run_once.py"), "--problem",
                                               str(d), "--kernel", str(d / "kernel.py"), "--cold"], cwd=d, env=env)
    argv = [ncu, "--csv", "--page", "raw", "--print-units", "base", "--target-processes", "all",
            "--log-file", str(d / "ncu.csv"), "--metrics", ",".join(metric_list())]
    if kernel_name(code):
        argv += ["--kernel-name", kernel_name(code)]
    argv += [sys.executable, str(ROOT / "harness" / "profile_wrapper.py"), "--problem", str(d / "problem.py"),
             "--kernel", str(d / "kernel.py")]
    row["ncu_s"], row["ncu_rc"], _ = timed(argv, cwd=d, env=env)
    row["device_s"] = row["test_s"] + row["bench_s"] + row["ncu_s"]
    return row


def ours(binary, config, kernel_dir, candidates, out, label, delay=None):
    env = dict(os.environ, KAGENT_HOME=str(ROOT))
    env.setdefault("KAGENT_PYTHON", sys.executable)
    if delay:
        env["KAGENT_REPLAY_DELAY_S"] = str(delay)
    runs = out / f"runs_{label}"
    cfg = out / f"{label}.yaml"
    text = pathlib.Path(config).read_text()
    cfg.write_text(text)
    wall, rc, tail = timed([binary, "--strategy", str(cfg), "--kernel-dir", kernel_dir, "--run-dir", str(runs), "-q"],
                           env=env, timeout=3600)
    run_dir = next(runs.iterdir())
    s = json.loads((run_dir / "summary.json").read_text())
    n = max(1, s.get("candidates", 0))
    profiles = sorted(p for p in run_dir.rglob("invocations.jsonl"))
    prof_s = [sum(json.loads(l).get("wall_s", 0) for l in p.read_text().splitlines() if l.strip()) for p in profiles]
    return {"label": label, "rc": rc, "wall_s": wall, "candidates": s.get("candidates"), "device_s": s.get("device_s"),
            "device_s_per_candidate": (s.get("device_s") or 0) / n, "gpu_busy_pct": s.get("gpu_busy_pct"),
            "best_ms": s.get("best_ms"), "best": s.get("best_program_id"), "profiles": len(profiles),
            "profile_s": prof_s, "per_hour": 3600.0 * n / s.get("session_wall_s", wall)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--kernel-dir", required=True)
    ap.add_argument("--candidates", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--design-limit", type=int, default=3)
    ap.add_argument("--delay", type=float, default=0)
    ap.add_argument("--ncu", default=shutil.which("ncu") or "/usr/local/cuda/bin/ncu")
    a = ap.parse_args()
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {"ours": ours(a.binary, a.config, a.kernel_dir, a.candidates, out, "instant")}
    print(json.dumps(result["ours"]), flush=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="ka_design_"))
    rows = [design_candidate(a.kernel_dir, n, c, work, a.ncu) for n, c in kernels_of(a.candidates, a.design_limit)]
    for r in rows:
        print(json.dumps(r), flush=True)
    shutil.rmtree(work, ignore_errors=True)
    result["design"] = rows
    design_s = statistics.median(r["device_s"] for r in rows) if rows else float("nan")
    if a.delay:
        result["ours_delay"] = ours(a.binary, a.config, a.kernel_dir, a.candidates, out, "delay", a.delay)
        print(json.dumps(result["ours_delay"]), flush=True)
    o = result["ours"]
    print("\n| | device s per candidate | vs KernelAgent design |")
    print("|---|---|---|")
    print(f"| KernelAgent design (fresh test.py + benchmark + ncu), median of {len(rows)} | {design_s:.2f} | 1.00x |")
    print(f"| kagent-actors, amortized over a run ({o['candidates']} candidates, {o['profiles']} profiles) | "
          f"{o['device_s_per_candidate']:.2f} | {design_s / o['device_s_per_candidate']:.1f}x |")
    if a.delay:
        d = result["ours_delay"]
        bound = 3600.0 * min(4.0 / (a.delay + design_s), 1.0 / design_s)
        print(f"\nat {a.delay:g} s per LLM reply: kagent-actors {d['per_hour']:.0f} candidates per GPU-hour "
              f"(GPU busy {d['gpu_busy_pct']} %), KernelAgent design at most {bound:.0f} ({d['per_hour'] / bound:.1f}x)")
    (out / "per_candidate.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
