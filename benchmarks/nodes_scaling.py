#!/usr/bin/env python3
"""Candidates per minute across devices and nodes (issue 16), measured side by side in one session:
the same search (matvec, cpu platform, matched replay replies delayed by KAGENT_REPLAY_DELAY_S) on
1, 2 and 4 devices of one node, and on 2 nodes of 2 devices each (`kagent-actors serve` processes on
loopback, the manager using no device of its own). --per-device pipelines per device (num_workers =
that x devices; default 2), so every device has a candidate waiting while another one waits for the LLM.

Scaling efficiency = throughput at N devices / (N x throughput at 1). On the cpu platform a device
is a Python evaluator running Triton's interpreter, so N devices need N cores: read the result
against the machine's core count (printed).

Usage: python3 benchmarks/nodes_scaling.py [--delay 3] [--rounds 3] [--samples 2] [--binary build/app/kagent-actors]
                                          [--sizes 1 4 2] [--compare OTHER_BINARY]
--compare runs each size on one node with both builds back to back (a change's effect on scaling).
"""
import argparse
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
SECRET = "benchmark-secret-0123456789"


PLATFORM = "cpu"


def config(base, devices, workers, rounds, samples, gpu_ids=True, schedule="rounds"):
    text = (ROOT / "configs" / "cpu.yaml").read_text()
    if PLATFORM != "cpu":
        # noop devices (KAGENT_NOOP_DEVICE_S: a fixed device time per request, no CPU used): the
        # runtime's own scaling, apart from what cpu devices cost each other on one host's CPU.
        text = re.sub(r"(?m)^platform: cpu$", f"platform: {PLATFORM}", text)
    text = text.replace("num_workers: 2", f"num_workers: {workers}")
    text = text.replace("max_rounds: 3", f"max_rounds: {rounds}")
    # Every pipeline may wait on the LLM at once (a fixed num_workers keeps llm.max_concurrency's default of 4).
    text = text.replace("  provider: replay", f"  provider: replay\n  max_concurrency: {workers}")
    text = text.replace("  num_bottlenecks: 2", f"  num_bottlenecks: 2\n  samples_per_prompt: {samples}\n  schedule: {schedule}")
    if gpu_ids:
        text += "gpu_ids: [" + ", ".join(str(i) for i in range(devices)) + "]\n"
    path = base / f"cpu_{devices}dev_{workers}w_{'ids' if gpu_ids else 'run'}.yaml"
    path.write_text(text)
    return path


def start_node(binary, base, name, cfg, env):
    log = open(base / f"{name}.log", "w")
    p = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--strategy", str(cfg), "--name", name,
                          "--scratch", str(base / f"{name}_scratch")], stdout=log, stderr=subprocess.STDOUT, env=env)
    for _ in range(600):
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", (base / f"{name}.log").read_text())
        if m:
            return p, f"127.0.0.1:{m.group(1)}"
        time.sleep(0.05)
    raise SystemExit(f"node {name} never listened: {(base / f'{name}.log').read_text()}")


def run(binary, base, label, cfg, env, extra=()):
    runs = base / f"runs_{label}"
    t0 = time.monotonic()
    r = subprocess.run([binary, "--strategy", str(cfg), "--kernel-dir", str(ROOT / "examples/optimize_01_matvec"),
                        "--run-dir", str(runs), "-q", *extra], env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"{label}: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    run_dir = next(runs.iterdir())
    summary = json.loads((run_dir / "summary.json").read_text())
    events = [json.loads(l) for l in (run_dir / "events.jsonl").read_text().splitlines() if l.strip()]
    starts = [e for e in events if e.get("type") == "candidate_start"]
    # The search's own span: from the first candidate handed out to the end (the starting kernel's
    # evaluation is the same in every configuration and is left out).
    def ts(e):
        return time.mktime(time.strptime(e["ts"][:19], "%Y-%m-%dT%H:%M:%S")) + float("0." + e["ts"][20:23])
    end = [e for e in events if e.get("type") == "run_end"][0]
    span = ts(end) - ts(starts[0]) if starts else wall
    # Steady throughput: from the first candidate handed out to the last candidate's result (the run's
    # closing work -- last reflexions, final profile, reports -- is the same at every size).
    results = [e for e in events if e.get("type") == "candidate_result"]
    flow = ts(results[-1]) - ts(starts[0]) if starts and results else span
    n = summary.get("candidates", 0)
    devices = sorted({e.get("gpu_id") for e in starts})
    return {"label": label, "candidates": n, "span_s": span, "per_min": 60.0 * n / span if span > 0 else 0,
            "flow_s": flow, "flow_per_min": 60.0 * n / flow if flow > 0 else 0,
            "devices_used": devices, "wall_s": wall, "best": summary.get("best_program_id"),
            "duplicates": summary.get("duplicates"), "verified": n - summary.get("failed", 0),
            "best_ms": summary.get("best_ms")}


def compare(a, base, env):
    """Each size with --binary and --compare back to back (alternating which goes first), one node."""
    print(f"machine: {os.cpu_count()} cores; LLM delay {a.delay} s per reply; {a.samples} samples, {a.rounds} "
          f"rounds, {a.schedule} schedule; this build: {a.binary}; other build: {a.compare}")
    res = {}
    for i, n in enumerate(a.sizes):
        order = [("this", a.binary), ("other", a.compare)]
        if i % 2:
            order.reverse()
        for tag, binary in order:
            cfg = config(base, n, a.per_device * n, a.rounds, a.samples, schedule=a.schedule)
            res[(tag, n)] = run(binary, base, f"{tag}-{n}dev", cfg, env)
            print(json.dumps(res[(tag, n)]), flush=True)
    print("\n| devices | candidates/min, this build | other build | efficiency, this | other |")
    print("|---|---|---|---|---|")
    for n in a.sizes:
        t, o = res[("this", n)], res[("other", n)]
        et = t["per_min"] / (n * res[("this", a.sizes[0])]["per_min"]) if res[("this", a.sizes[0])]["per_min"] else 0
        eo = o["per_min"] / (n * res[("other", a.sizes[0])]["per_min"]) if res[("other", a.sizes[0])]["per_min"] else 0
        print(f"| {n} | {t['per_min']:.1f} | {o['per_min']:.1f} | {et:.2f} | {eo:.2f} |")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=str(ROOT / "build/app/kagent-actors"))
    ap.add_argument("--delay", type=float, default=3.0, help="KAGENT_REPLAY_DELAY_S: seconds per LLM reply")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--samples", type=int, default=2, help="samples_per_prompt: more candidates per round")
    ap.add_argument("--schedule", default="rounds", choices=["rounds", "async"],
                    help="strategy_config.schedule (async keeps every device fed across the round barrier)")
    ap.add_argument("--platform", default="cpu", choices=["cpu", "noop"],
                    help="cpu: Triton's interpreter on CPU tensors (the devices share the host's CPU); noop: "
                         "devices that hold each request --device-s seconds without using the CPU")
    ap.add_argument("--device-s", type=float, default=1.0, help="noop: seconds per device request "
                    "(verify and benchmark are one each)")
    ap.add_argument("--no-nodes", action="store_true", help="one node only (leave out the 2 nodes x 2 devices run)")
    ap.add_argument("--per-device", type=int, default=2, help="candidate pipelines per device (num_workers)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 2], help="devices on one node, in this order")
    ap.add_argument("--compare", metavar="BINARY", help="another build: one node only, each size run with "
                    "both binaries back to back, and the two efficiencies side by side")
    a = ap.parse_args()
    env = dict(os.environ, KAGENT_REPLAY_DELAY_S=str(a.delay), KAGENT_NODE_SECRET=SECRET)
    global PLATFORM
    PLATFORM = a.platform
    if a.platform == "noop":
        env["KAGENT_NOOP_DEVICE_S"] = str(a.device_s)
    base = pathlib.Path(tempfile.mkdtemp(prefix="kagent_scaling_"))
    if a.compare:
        return compare(a, base, env)
    print(f"machine: {os.cpu_count()} cores; platform {a.platform}"
          f"{f' ({a.device_s} s per device request)' if a.platform == 'noop' else ''}; "
          f"LLM delay {a.delay} s per reply; matvec, beam 2x2, "
          f"{a.samples} samples, {a.rounds} rounds, {a.schedule} schedule; {a.per_device} pipelines per device")
    results = []
    # 1 and 4 devices first: the efficiency at 4 is the figure that matters if time runs out.
    sizes = tuple(a.sizes)
    for n in sizes:
        results.append(run(a.binary, base, f"1 node, {n} device(s)", config(base, n, a.per_device * n, a.rounds, a.samples, schedule=a.schedule), env))
        print(json.dumps(results[-1]), flush=True)
    sizes_done = sizes if a.no_nodes else (*sizes, 4)
    if not a.no_nodes:
        node_cfg = config(base, 2, 2 * a.per_device, a.rounds, a.samples, schedule=a.schedule)
        nodes = [start_node(a.binary, base, name, node_cfg, env) for name in ("nodeA", "nodeB")]
        try:
            run_cfg = config(base, 4, 4 * a.per_device, a.rounds, a.samples, gpu_ids=False, schedule=a.schedule)
            results.append(run(a.binary, base, "2 nodes x 2 devices", run_cfg, env,
                               ["--no-local-devices", "--node", nodes[0][1], "--node", nodes[1][1]]))
            print(json.dumps(results[-1]), flush=True)
        finally:
            for p, _ in nodes:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=60)
    one, one_flow = results[0]["per_min"], results[0]["flow_per_min"]
    print("\nspan: first candidate handed out to run_end; flow: to the last candidate's result")
    print("\n| configuration | candidates | span (s) | candidates/min | efficiency | flow (s) | candidates/min "
          "| efficiency | best |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r, n in zip(results, sizes_done):
        ratio = r["per_min"] / one if one else 0
        fr = r["flow_per_min"] / one_flow if one_flow else 0
        print(f"| {r['label']} | {r['candidates']} | {r['span_s']:.1f} | {r['per_min']:.1f} | {ratio / n:.2f} | "
              f"{r['flow_s']:.1f} | {r['flow_per_min']:.1f} | {fr / n:.2f} | {r['best']} ({r['best_ms']:.2f} ms) |")


if __name__ == "__main__":
    sys.exit(main())
