#!/usr/bin/env python3
"""Times every kernel of a replay set side by side, the way the search measures them.

Each distinct kernel found in the set's replies (and the example's input.py, the root) is verified
once and benchmarked --runs times with harness/run_once.py in a fresh process, exactly as the gpu
worker's process backend does (--device cpu runs Triton's interpreter on the problem's small size).
The runs are interleaved (run 1 of every kernel, then run 2, ...) so a slow spell of the machine
hits all kernels alike. Prints one row per kernel: correctness, the median over runs of run_once's
median time, the spread, the ratio to the root, the duplicate group (normalised-source hash, what
dedup uses on the cpu platform) and the files that serve it.

Usage:
  python3 benchmarks/replay_variants.py --kernel-dir examples/optimize_02_rmsnorm [--runs 3]
      [--warmup 5 --repeat 20] [--device cpu] [--json out.json]
      [--check --expect-fail rms-v4 --min-gap 1.5]

--check exits 1 when a kernel named by --expect-fail passes verification, another kernel fails it,
or two correct kernels with different hashes are less than --min-gap apart (median ratio).
"""
import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "harness"))
import harness_core as core  # noqa: E402  (torch-free: only the hash normalisation is used)

REPLY = re.compile(r"^(?P<purpose>.+)_(?P<num>\d+)\.(md|txt|py)$")
MARKER = re.compile(r"^#\s*variant:\s*(\S+)", re.M)


def strip_front_matter(text):
    """The reply without its <!-- replay ... --> block (the replay provider's rule)."""
    if not text.startswith("<!-- replay"):
        return text
    first, _, rest = text.partition("\n")
    if first.strip() != "<!-- replay":
        return text
    lines = rest.split("\n")
    for i, line in enumerate(lines):
        if line.strip() == "-->":
            return "\n".join(lines[i + 1:])
    raise SystemExit("unterminated front matter")


def extract_code(reply):
    """The ```python block that defines kernel_function (the provider's first choice), else None."""
    blocks = re.findall(r"```(?:python|py|python3)[ \t]*\n(.*?)```", reply, re.S)
    for b in blocks:
        if re.search(r"^def kernel_function\s*\(", b, re.M):
            return b.strip() + "\n"
    return None


def collect(kernel_dir, replay_dir):
    """[(name, code, [sources])], root first, one entry per distinct code text."""
    kernels = {}
    order = []

    def add(code, source):
        if code not in kernels:
            m = MARKER.search(code)
            kernels[code] = {"name": m.group(1) if m else None, "sources": []}
            order.append(code)
        kernels[code]["sources"].append(source)

    add((kernel_dir / "input.py").read_text(), "input.py")
    for p in sorted(replay_dir.iterdir()):
        if not REPLY.match(p.name):
            continue
        code = extract_code(strip_front_matter(p.read_text()))
        if code is not None:
            add(code, p.name)
    out = []
    seen = {}
    for code in order:
        k = kernels[code]
        name = k["name"] or ("root" if "input.py" in k["sources"] else k["sources"][0])
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:  # the same marker on different code: a duplicate or a refinement
            name = f"{name}#{seen[name]}"
        out.append({"name": name, "code": code, "sources": k["sources"],
                    "hash": core.sha256(core.normalize_source(code))[:12]})
    return out


def run_once(kernel_dir, path, mode, a):
    cmd = [sys.executable, str(ROOT / "harness/run_once.py"), "--problem", str(kernel_dir), "--kernel", str(path),
           "--device", a.device, "--warmup", str(a.warmup), "--repeat", str(a.repeat), "--mode", mode]
    if mode == "benchmark":
        cmd += ["--targets", "candidate"]
    if a.size:
        cmd += ["--size", a.size]
    env = dict(os.environ)
    if a.device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=path.parent, timeout=600)
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"ok": False, "error": (r.stderr or r.stdout)[-500:]}
    return json.loads(lines[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel-dir", required=True, help="example directory (problem.py, input.py, replay/)")
    ap.add_argument("--replay-dir", help="default: <kernel-dir>/replay")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--size", default=None, help="problem size (run_once's default: small on cpu)")
    ap.add_argument("--runs", type=int, default=3, help="benchmark processes per kernel")
    ap.add_argument("--warmup", type=int, default=5, help="as configs/cpu.yaml's benchmark_warmup")
    ap.add_argument("--repeat", type=int, default=20, help="as configs/cpu.yaml's benchmark_repeat")
    ap.add_argument("--json", help="also write the measurements here")
    ap.add_argument("--check", action="store_true", help="exit 1 when the expectations below do not hold")
    ap.add_argument("--expect-fail", action="append", default=[], help="variant that must fail verification")
    ap.add_argument("--min-gap", type=float, default=1.5, help="least ratio between two correct kernels")
    a = ap.parse_args()

    kernel_dir = pathlib.Path(a.kernel_dir).resolve()
    replay_dir = pathlib.Path(a.replay_dir).resolve() if a.replay_dir else kernel_dir / "replay"
    kernels = collect(kernel_dir, replay_dir)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="kagent_replay_variants_"))
    for i, k in enumerate(kernels):
        k["path"] = tmp / f"k{i:02d}" / "kernel.py"
        k["path"].parent.mkdir()
        k["path"].write_text(k["code"])
        v = run_once(kernel_dir, k["path"], "verify", a)
        k["passed"] = bool(v.get("ok"))
        k["error"] = None if k["passed"] else (v.get("error") or "")[:160]
        k["times"] = []
        print(f"verified {k['name']:12s} {'pass' if k['passed'] else 'FAIL'}", file=sys.stderr, flush=True)
    for run in range(a.runs):
        for k in kernels:
            b = run_once(kernel_dir, k["path"], "benchmark", a)
            t = (((b.get("result") or {}).get("benchmark") or {}).get("candidate") or {}).get("median_ms")
            if t is not None:
                k["times"].append(t)
        print(f"benchmark run {run + 1}/{a.runs} done", file=sys.stderr, flush=True)

    for k in kernels:
        k["median_ms"] = statistics.median(k["times"]) if k["times"] else None
        k["spread"] = (max(k["times"]) - min(k["times"])) / k["median_ms"] if len(k["times"]) > 1 else 0.0
    root = kernels[0]["median_ms"]
    first_of_hash = {}
    for k in kernels:
        first_of_hash.setdefault(k["hash"], k["name"])
        k["duplicate_of"] = first_of_hash[k["hash"]] if first_of_hash[k["hash"]] != k["name"] else None

    print(f"\n{kernel_dir.name}: run_once.py --device {a.device} --warmup {a.warmup} --repeat {a.repeat}, "
          f"{a.runs} runs each (median of the runs' medians)")
    print(f"{'variant':12s} {'verify':6s} {'median ms':>10s} {'spread':>7s} {'root/x':>7s}  {'hash':12s}  "
          f"{'duplicate of':13s} files")
    for k in sorted(kernels, key=lambda k: k["median_ms"] if k["median_ms"] is not None else 1e30):
        ms = k["median_ms"]
        print(f"{k['name']:12s} {'pass' if k['passed'] else 'FAIL':6s} "
              f"{ms if ms is not None else float('nan'):10.2f} {k['spread']:7.2f} "
              f"{root / ms if ms and root else float('nan'):7.2f}  {k['hash']:12s}  {k['duplicate_of'] or '-':13s} "
              f"{', '.join(k['sources'])}")
    for k in kernels:
        if not k["passed"]:
            print(f"  {k['name']}: {k['error']}")

    correct = sorted((k for k in kernels if k["passed"] and not k["duplicate_of"] and k["median_ms"]),
                     key=lambda k: k["median_ms"])
    print("\ncorrect kernels, fastest first, with the ratio to the next faster one:")
    problems = []
    for prev, k in zip([None] + correct[:-1], correct):
        gap = k["median_ms"] / prev["median_ms"] if prev else None
        print(f"  {k['name']:12s} {k['median_ms']:8.2f} ms" + (f"   {gap:.2f}x {prev['name']}" if gap else ""))
        if gap is not None and gap < a.min_gap:
            problems.append(f"{k['name']} is only {gap:.2f}x slower than {prev['name']} (< {a.min_gap})")
    for k in kernels:
        base = k["name"].split("#")[0]
        if base in a.expect_fail and k["passed"]:
            problems.append(f"{k['name']} passes verification but is expected to fail")
        if base not in a.expect_fail and not k["passed"]:
            problems.append(f"{k['name']} fails verification: {k['error']}")

    if a.json:
        with open(a.json, "w") as f:
            json.dump({"kernel_dir": str(kernel_dir), "device": a.device, "warmup": a.warmup, "repeat": a.repeat,
                       "runs": a.runs,
                       "kernels": [{x: k[x] for x in ("name", "sources", "hash", "duplicate_of", "passed", "error",
                                                      "times", "median_ms", "spread")} for k in kernels]},
                      f, indent=1)
    if a.check:
        for p in problems:
            print("CHECK FAILED: " + p)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
