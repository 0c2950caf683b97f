#!/usr/bin/env python3
"""Launch-constant variants while the LLM thinks (issue 14, GPU busy), side by side in one invocation.

Runs `kagent-actors` on the cpu platform (the trusted harness, Triton's interpreter) on the matvec
example with the shipped replay set, each LLM reply delayed by --delay seconds, once with
`tune_variants: 0` and once with `tune_variants: N`, alternating which goes first over --pairs pairs.
For each run it prints the summary's GPU busy (device seconds over the run's device capacity), the
wall time, the LLM's candidates and the variants (verified / run), and the best kernel with its time
and who wrote it; then the ratio of busy and of best time, with against without.

The device here is the CPU and its "kernels" run in an interpreter, so the absolute numbers are not
a GPU's; what it shows is the shape: how much of the LLM's wait the variants fill, and whether they
find a faster kernel than the LLM's. benchmarks/h200/tune_session.sh runs the same pair on a GPU.

Usage: python3 benchmarks/tune_busy.py [--binary build/app/kagent-actors] [--delay 3] [--variants 4]
                                       [--rounds 2] [--pairs 1]
"""
import argparse
import json
import pathlib
import re
import sqlite3
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def one(binary, work, tag, delay, variants, rounds):
    cfg = (ROOT / "configs" / "cpu.yaml").read_text().replace("max_rounds: 3", f"max_rounds: {rounds}")
    cfg += f"tune_variants: {variants}\n"
    path = work / f"{tag}.yaml"
    path.write_text(cfg)
    runs = work / f"runs_{tag}"
    env = {"PATH": "/usr/bin:/bin", "KAGENT_REPLAY_DELAY_S": str(delay), "HOME": str(work)}
    t0 = time.monotonic()
    p = subprocess.run([str(binary), "--strategy", str(path), "--kernel-dir", str(ROOT / "examples" / "optimize_01_matvec"),
                        "--run-dir", str(runs)], env=env, capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit(f"{tag}: kagent-actors exited {p.returncode}: {p.stderr[-2000:]}")
    run = next(runs.iterdir())
    s = json.loads((run / "summary.json").read_text())
    rows = sqlite3.connect(run / "program.db").execute("select id, status, time_ms from programs").fetchall()
    llm = [r for r in rows if re.match(r"r\d+_c\d+$", r[0])]
    tuned = [r for r in rows if re.match(r"r\d+_t\d+$", r[0])]
    best = s.get("best_program_id")
    best_ms = next((r[2] for r in rows if r[0] == best), None)
    return {"tag": tag, "busy": s.get("gpu_busy_pct") or 0.0, "wall": wall, "llm": len(llm),
            "llm_ok": sum(r[1] == "verified" for r in llm), "tuned": len(tuned),
            "tuned_ok": sum(r[1] == "verified" for r in tuned), "best": best, "best_ms": best_ms,
            "by": "variant" if re.match(r"r\d+_t\d+$", best or "") else "LLM"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=str(ROOT / "build" / "app" / "kagent-actors"))
    ap.add_argument("--delay", type=float, default=3.0)
    ap.add_argument("--variants", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--pairs", type=int, default=1)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        work = pathlib.Path(d)
        results = []
        for i in range(a.pairs):
            order = [("off", 0), ("on", a.variants)] if i % 2 == 0 else [("on", a.variants), ("off", 0)]
            for tag, n in order:
                r = one(a.binary, work, f"{tag}{i}", a.delay, n, a.rounds)
                results.append(r)
                print(f"{r['tag']:5} busy {r['busy']:5.1f} %  wall {r['wall']:6.1f} s  LLM candidates {r['llm']} "
                      f"({r['llm_ok']} verified)  variants {r['tuned']} ({r['tuned_ok']} verified)  "
                      f"best {r['best']} {r['best_ms']:.2f} ms by the {r['by']}", flush=True)
        off = [r for r in results if r["tag"].startswith("off")]
        on = [r for r in results if r["tag"].startswith("on")]
        mean = lambda rs, k: sum(r[k] for r in rs) / len(rs)
        print(f"busy with/without: {mean(on, 'busy') / max(1e-9, mean(off, 'busy')):.2f}x "
              f"({mean(on, 'busy'):.1f} % against {mean(off, 'busy'):.1f} %); best time with/without: "
              f"{mean(on, 'best_ms') / mean(off, 'best_ms'):.3f}; wall with/without: {mean(on, 'wall') / mean(off, 'wall'):.2f}")


if __name__ == "__main__":
    main()
