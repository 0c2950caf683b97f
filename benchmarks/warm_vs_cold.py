#!/usr/bin/env python3
"""Per-candidate device-side cost: the warm evaluator (one server per GPU, inputs built once) versus
a cold process per candidate (harness/run_once.py), on the same candidates in the same run, plus the
agreement of the harness's timing with triton.testing.do_bench on the same kernels.

Usage: python3 benchmarks/warm_vs_cold.py --kernel-dir examples/optimize_01_matvec \
           --candidates benchmarks/h200/replay_matvec [--device cuda] [--size small] [--cold-limit 3]
Prints one table per example; the ratios are measured side by side in this one run.
"""
import argparse
import json
import os
import pathlib
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def extract(md):
    m = re.search(r"```python\n(.*?)```", md, re.S)
    return m.group(1) if m else md


class Server:
    def __init__(self, device, log_dir):
        parent, child = socket.socketpair()
        env = dict(os.environ)
        if device == "cpu":
            env["TRITON_INTERPRET"] = "1"
        self.proc = subprocess.Popen(
            [sys.executable, "-u", str(ROOT / "harness/evaluator.py"), "--fd", str(child.fileno()), "--log-dir", log_dir],
            pass_fds=[child.fileno()], env=env)
        child.close()
        self.sock = parent
        self.f = parent.makefile("rwb")
        self.n = 0

    def ask(self, req):
        self.n += 1
        req = dict(req, id=self.n)
        self.f.write((json.dumps(req) + "\n").encode())
        self.f.flush()
        line = self.f.readline()
        if not line:
            raise RuntimeError(f"evaluator died on {req['op']}")
        return json.loads(line)

    def close(self):
        try:
            self.ask({"op": "shutdown"})
        except Exception:  # noqa: BLE001
            pass
        self.proc.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel-dir", required=True)
    ap.add_argument("--candidates", required=True, help="directory of replay .md files (kernels)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--size", default=None)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--cold-limit", type=int, default=3, help="cold processes to run (they are slow)")
    ap.add_argument("--json", help="write the measurements here")
    a = ap.parse_args()

    kdir = pathlib.Path(a.kernel_dir).resolve()
    cands = [("input", (kdir / "input.py").read_text())]
    for p in sorted(pathlib.Path(a.candidates).glob("optimize_*.md")):
        code = extract(p.read_text())
        if "while True" in code or "1 << 40" in code or "1 << 34" in code:
            continue  # the hanging and faulting candidates are exercised by the real run, not timed here
        cands.append((p.stem, code))

    tmp = tempfile.mkdtemp(prefix="kagent_bench_")
    out = {"kernel_dir": str(kdir), "device": a.device, "candidates": []}
    t0 = time.perf_counter()
    srv = Server(a.device, tmp)
    srv.ask({"op": "ping"})
    load = srv.ask({"op": "load_problem", "problem": str(kdir), "device": a.device, "size": a.size})
    setup_s = time.perf_counter() - t0
    print(f"warm server set-up (interpreter, torch import, inputs on device): {setup_s:.2f} s", flush=True)
    if not load.get("ok"):
        print(json.dumps(load, indent=1))
        sys.exit(1)
    for name, code in cands:
        t = time.perf_counter()
        v = srv.ask({"op": "verify", "code": code, "workdir": tmp})
        b = srv.ask({"op": "benchmark", "code": code, "workdir": tmp, "warmup": a.warmup, "repeat": a.repeat,
                     "targets": ["candidate"], "do_bench": a.device != "cpu"})
        warm_s = time.perf_counter() - t
        r = b.get("result", {}) if b.get("ok") else {}
        c = r.get("candidate", {})
        db = (r.get("do_bench") or {}).get("median_ms")
        out["candidates"].append({"name": name, "passed": bool(v.get("ok") and v["result"].get("passed")),
                                  "median_ms": c.get("median_ms"), "iqr_rel": c.get("iqr_rel"),
                                  "do_bench_ms": db, "warm_s": warm_s})
        print(f"  warm {name:14s} passed={out['candidates'][-1]['passed']!s:5s} "
              f"median={c.get('median_ms', float('nan')):.4f} ms iqr/median={c.get('iqr_rel', float('nan')):.3f} "
              f"do_bench={db if db is None else round(db, 4)} ms  {warm_s:.3f} s", flush=True)
    refs = srv.ask({"op": "benchmark", "code": cands[0][1], "workdir": tmp, "warmup": a.warmup, "repeat": a.repeat,
                    "targets": ["eager", "compile"]})
    srv.close()
    rr = refs.get("result", {})
    out["eager_ms"] = rr.get("eager", {}).get("median_ms")
    out["compile_ms"] = rr.get("compile", {}).get("median_ms")

    cold = []
    for name, code in cands[: a.cold_limit]:
        path = pathlib.Path(tmp) / f"cold_{name}.py"
        path.write_text(code)
        cmd = [sys.executable, str(ROOT / "harness/run_once.py"), "--problem", str(kdir), "--kernel", str(path),
               "--device", a.device, "--warmup", str(a.warmup), "--repeat", str(a.repeat), "--targets", "candidate"]
        if a.size:
            cmd += ["--size", a.size]
        env = dict(os.environ)
        if a.device == "cpu":
            env["TRITON_INTERPRET"] = "1"
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
        cold.append(time.perf_counter() - t)
        print(f"  cold {name:14s} {cold[-1]:.2f} s", flush=True)
    warm = [c["warm_s"] for c in out["candidates"][: len(cold)]]
    out["cold_s"] = cold
    out["warm_setup_s"] = setup_s
    wm, cm = statistics.median(warm), statistics.median(cold)
    out["warm_median_s"], out["cold_median_s"] = wm, cm
    print(f"\nper candidate (verify + benchmark), same {len(cold)} candidates: warm {wm:.3f} s, cold {cm:.2f} s, "
          f"cold/warm = {cm / wm:.1f}x")
    agree = [(c["median_ms"], c["do_bench_ms"]) for c in out["candidates"] if c["median_ms"] and c["do_bench_ms"]]
    if agree:
        dev = [abs(m - d) / d * 100 for m, d in agree]
        print(f"harness median vs do_bench: max deviation {max(dev):.1f}%, median {statistics.median(dev):.1f}%")
    print(f"eager {out['eager_ms']} ms, torch.compile {out['compile_ms']} ms")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
