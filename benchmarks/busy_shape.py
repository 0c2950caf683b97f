#!/usr/bin/env python3
"""GPU busy behind a slow LLM, by the shape of the search (issue 14, item 4), measured side by side in
one invocation on `noop` devices: a device that holds each request KAGENT_NOOP_DEVICE_S seconds
without using the CPU, so the runtime (candidate pipelines, the device actor and its lock, the LLM
client, `num_workers: auto`, the async schedule) is all that is measured, on any machine.

The H100 run of 2026-12-06 (`busy_wide`: beam 2x3, 4 samples per prompt, 2 rounds, 20 s replies,
1.9 device-s per candidate) kept its GPU 65.9 % busy. This script asks whether that is the runtime's
limit or the search's: it runs that shape and wider or deeper ones at the same ratio of LLM time to
device time, one device, `num_workers: auto`, async schedule, and prints, for each, GPU busy (the
summary's gpu_busy_pct: device seconds over the run's device capacity), the busy share of the search's
steady part (from the first candidate dispatched to the last candidate's result), candidates, and
the concurrency `auto` chose.

By default the H100 figures are scaled down 4x in time (5 s replies, 0.2375 s per device request:
verify and benchmark are one each, 0.475 s per candidate), which keeps the ratio (about 21 LLM-s per
device-s) and the run short. --delay and --device-s set them.

--compare OTHER_BINARY runs every shape with both builds back to back (alternating which goes first)
and prints their GPU busy side by side: a change's effect, measured in one invocation.

Usage: python3 benchmarks/busy_shape.py [--binary build/app/kagent-actors] [--delay 5] [--device-s 0.2375]
                                        [--shapes issue wide wider] [--compare OTHER_BINARY]
"""
import argparse
import datetime as dt
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
REPLAY = ROOT / "benchmarks" / "h200" / "replay_matvec_wide"

# name: (samples_per_prompt, max_rounds, num_top_kernels, num_bottlenecks, what it is)
SHAPES = {
    "issue": (4, 2, 2, 3, "busy_wide on the H100: beam 2x3, 4 samples, 2 rounds"),
    "wide": (8, 2, 2, 3, "8 samples per prompt, 2 rounds"),
    "deep": (4, 4, 2, 3, "4 samples per prompt, 4 rounds"),
    "both": (8, 4, 2, 3, "8 samples per prompt, 4 rounds"),
    "wider": (16, 2, 2, 3, "16 samples per prompt, 2 rounds"),
}


def config(base, name):
    samples, rounds, top, bottlenecks, _ = SHAPES[name]
    text = f"""# busy_shape.py, shape {name}
strategy: beam_search
num_workers: auto
max_rounds: {rounds}
strategy_config:
  num_top_kernels: {top}
  num_bottlenecks: {bottlenecks}
  samples_per_prompt: {samples}
  schedule: async
roofline_config:
  early_stop: false
platform: noop
benchmark_warmup: 5
benchmark_repeat: 20
target_platform: cpu
compile_reference: false
max_refine_attempts: 0
llm:
  provider: replay
  replay_dir: {REPLAY}
"""
    path = base / f"{name}.yaml"
    path.write_text(text)
    return path


def ts(s):
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def run(binary, base, name, env, tag=""):
    runs = base / f"runs_{name}{tag}"
    t0 = time.monotonic()
    r = subprocess.run([binary, "--strategy", str(config(base, name)), "--kernel-dir",
                        str(ROOT / "examples/optimize_01_matvec"), "--run-dir", str(runs), "-q"],
                       env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"{name}: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    run_dir = next(runs.iterdir())
    summary = json.loads((run_dir / "summary.json").read_text())
    events = [json.loads(l) for l in (run_dir / "events.jsonl").read_text().splitlines() if l.strip()]
    starts = [ts(e["ts"]) for e in events if e.get("type") == "candidate_start"]
    results = [ts(e["ts"]) for e in events if e.get("type") == "candidate_result"]
    begin = ts(events[0]["ts"])
    end = ts([e for e in events if e.get("type") == "run_end"][0]["ts"])
    device_s = float(summary.get("device_s") or 0.0)
    # The pipelines in flight when the first candidate went out (auto's floor, or its first estimate).
    first_workers = next((e.get("num_workers") for e in events if e.get("type") == "run_start"), None)
    for e in events:
        if e.get("type") == "candidate_start":
            break
        if e.get("type") == "concurrency":
            first_workers = e.get("num_workers")
    steady = (results[-1] - starts[0]) if starts and results else 0.0
    # Device seconds inside the steady part: every candidate's requests fall in it; the starting
    # kernel's come before it (one verify and one benchmark: 2 x --device-s).
    return {
        "shape": name,
        "candidates": summary.get("candidates"),
        "wall_s": round(wall, 1),
        "run_s": round(end - begin, 1),
        "device_s": round(device_s, 1),
        "gpu_busy_pct": summary.get("gpu_busy_pct"),
        "steady_s": round(steady, 1),
        "first_candidate_s": round(starts[0] - begin, 1) if starts else None,
        "num_workers": summary.get("num_workers"),
        "first_workers": first_workers,
        "num_workers_reason": summary.get("num_workers_reason"),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=str(ROOT / "build/app/kagent-actors"))
    ap.add_argument("--delay", type=float, default=5.0, help="KAGENT_REPLAY_DELAY_S: seconds per LLM reply")
    ap.add_argument("--device-s", type=float, default=0.2375, help="seconds per device request (two per candidate)")
    ap.add_argument("--shapes", nargs="+", default=["issue", "wide", "wider"], choices=sorted(SHAPES))
    ap.add_argument("--compare", metavar="BINARY", help="another build, run on every shape beside --binary")
    a = ap.parse_args()
    env = dict(os.environ, KAGENT_REPLAY_DELAY_S=str(a.delay), KAGENT_NOOP_DEVICE_S=str(a.device_s))
    base = pathlib.Path(tempfile.mkdtemp(prefix="kagent_busy_shape_"))
    per_cand = 2 * a.device_s
    print(f"machine: {os.cpu_count()} cores; noop device, {a.device_s} s per request ({per_cand:g} s per "
          f"candidate); LLM replies {a.delay} s ({2 * a.delay / per_cand:.1f} LLM-s per device-s of a "
          f"candidate: its reply and its reflexion); matvec replay set {REPLAY.name}; num_workers: auto; async")
    if a.compare:
        print(f"this build: {a.binary}; other build: {a.compare}")
        res = {}
        for i, name in enumerate(a.shapes):
            order = [("this", a.binary), ("other", a.compare)]
            if i % 2:
                order.reverse()
            for tag, binary in order:
                res[(tag, name)] = run(binary, base, name, env, "_" + tag)
                print(tag, json.dumps(res[(tag, name)]), flush=True)
        print("\n| shape | candidates | GPU busy, this build | other build | run (s), this | other "
              "| first-generation pipelines, this | other |")
        print("|---|---|---|---|---|---|---|---|")
        for name in a.shapes:
            t, o = res[("this", name)], res[("other", name)]
            print(f"| {name}: {SHAPES[name][4]} | {t['candidates']} / {o['candidates']} | {t['gpu_busy_pct']:.1f} % | "
                  f"{o['gpu_busy_pct']:.1f} % | {t['run_s']} | {o['run_s']} | {t['first_workers']} | {o['first_workers']} |")
        return 0
    rows = []
    for name in a.shapes:
        rows.append(run(a.binary, base, name, env))
        print(json.dumps(rows[-1]), flush=True)
    print("\n| shape | candidates | run (s) | device (s) | GPU busy | device-s in the steady part / its span "
          "| first candidate at | num_workers |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        cand_device = (r["candidates"] or 0) * per_cand
        steady_pct = 100.0 * cand_device / r["steady_s"] if r["steady_s"] else 0.0
        busy = r["gpu_busy_pct"]
        print(f"| {r['shape']}: {SHAPES[r['shape']][4]} | {r['candidates']} | {r['run_s']} | {r['device_s']} | "
              f"{busy:.1f} % | {steady_pct:.1f} % ({cand_device:.1f} / {r['steady_s']} s) | "
              f"{r['first_candidate_s']} s | {r['num_workers']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
