#!/usr/bin/env python3
"""What trust costs per candidate, measured side by side in one process and one session:

  before   the former warm evaluator: candidate imported, verified (1 input set) and timed inside the
           process that holds the references (harness_core.verify / benchmark, in process);
  before_novel  the same, with each kernel new to Triton's cache (a comment added to its body), as
           every kernel an LLM writes is; launchers stay cached (before_cold empties both caches);
  after    the trusted judge (harness/judge.py): a pre-warmed single-use worker per candidate, 3 input
           sets, sampled timed calls with changing inputs, wall-clock bound, physics floor;
  sandbox  the same judge with every worker inside bubblewrap (--bwrap PATH);

plus the agreement of the judge's median with triton.testing.do_bench on the same kernels, and the
verdict of every kernel of the cheat corpus. "steady" is the per-candidate verify+benchmark wall
time when the next worker had time to warm up (as behind an LLM call); "back-to-back" counts the
wait for it too.

Each pass runs in a fresh Python process of its own (this script with --only-pass), one after the
other in the same invocation: a pass cannot leave device memory, allocator caches or patched modules
to the next. On an 80 GB card RMSNorm's passes did not fit in one process (each holds several
3.7 GB tensors), and the judge decides its resident input sets from the memory it finds free.

Usage: benchmarks/trusted_cost.py --kernel-dir examples/optimize_01_matvec --candidates benchmarks/h200/replay_matvec
           [--device cuda] [--size small] [--cheats tests/cheats/matvec] [--bwrap PATH] [--peak-gbps 4800]
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
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "harness"))


def extract(md):
    m = re.search(r"```python\n(.*?)```", md, re.S)
    return m.group(1) if m else md


def candidates(directory):
    out = []
    for p in sorted(pathlib.Path(directory).glob("optimize_*.md")):
        code = extract(p.read_text())
        if "kernel_function" in code:
            out.append((p.name, code))
    return out


def bwrap_prefix(bwrap):
    devs = [f"/dev/{d}" for d in sorted(os.listdir("/dev")) if d.startswith(("nvidia", "dri", "kfd"))]
    pre = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev"]
    for d in devs:
        pre += ["--dev-bind", d, d]
    if os.path.isdir("/dev/shm"):
        pre += ["--bind", "/dev/shm", "/dev/shm"]
    pre += ["--proc", "/proc", "--tmpfs", "/tmp", "--bind", "{scratch}", "{scratch}", "--unshare-pid",
            "--unshare-net", "--die-with-parent", "--new-session", "--"]
    return pre


def salted(code, tag):
    """The candidate with a comment line added to the body of each @triton.jit function: Triton's
    cache key hashes the function's source, so the kernel compiles again from nothing (as a kernel the
    LLM just wrote does), while its launcher, keyed by the signature's C source, stays cached."""
    lines = code.split("\n")
    out, i, armed = [], 0, False
    while i < len(lines):
        line = lines[i]
        out.append(line)
        if re.match(r"\s*@triton\.jit", line):
            armed = True
        elif armed and re.match(r"\s*def\s", line):
            # the signature may span lines: the body starts after the line that ends with ":"
            while not lines[i].rstrip().endswith(":") and i + 1 < len(lines):
                i += 1
                out.append(lines[i])
            body = next((ln for ln in lines[i + 1:] if ln.strip()), "    pass")
            indent = body[:len(body) - len(body.lstrip())]
            out.append(f"{indent}# novel kernel {tag}")
            armed = False
        i += 1
    return "\n".join(out)


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def run_before(core, problem_path, device, size, cands, warmup, repeat, tmp, cold=False, novel=False):
    problem = core.Problem(problem_path, device, "bfloat16", size, 0)
    rows = {}
    for name, code in cands:
        if "while True" in code or "1 << 40" in code or "1 << 34" in code:
            # A hang or a device fault would stop (or poison) this in-process evaluator for good.
            rows[name] = {"wall_s": float("nan"), "passed": False, "error": "skipped in-process (hang/fault)"}
            continue
        if cold:
            # A kernel the LLM just wrote is new to Triton's cache: compile it from nothing, as a real run does.
            os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="cold-cache-", dir=tmp)
        if novel:
            code = salted(code, f"{os.getpid()}-{time.time_ns()}")
        path = os.path.join(tmp, f"before_{'cold_' if cold else 'novel_' if novel else ''}{name}.py")
        with open(path, "w") as f:
            f.write(code)
        t0 = time.perf_counter()
        try:
            cand = core.load_candidate(path, code)
            v = core.verify(problem, cand, trials=1)
            verify_s = time.perf_counter() - t0
            ms = None
            if v["passed"]:
                b = core.benchmark(problem, cand, warmup=warmup, repeat=repeat, targets=["candidate"])
                ms = b["candidate"]["median_ms"]
            wall = time.perf_counter() - t0
            db = None
            if v["passed"] and device.startswith("cuda") and not cold and not novel:
                import triton.testing
                inputs = problem.fresh_inputs()
                args, kwargs = core.bind_arguments(cand.fn, inputs, problem.named)
                db = float(triton.testing.do_bench(lambda: cand.fn(*args, **kwargs), warmup=25, rep=100,
                                                   return_mode="median"))
            rows[name] = {"wall_s": wall if v["passed"] else time.perf_counter() - t0, "passed": v["passed"],
                          "median_ms": ms, "do_bench_ms": db, "load_and_verify_s": verify_s}
            print("  before", name, rows[name], flush=True)
        except Exception as exc:  # noqa: BLE001
            rows[name] = {"wall_s": time.perf_counter() - t0, "passed": False, "error": repr(exc)[:200]}
        core.release()
    del problem
    core.release()
    return rows


def run_judge(judge_mod, core, problem_path, device, size, cands, warmup, repeat, prefix, peak, steady):
    log = tempfile.mkdtemp(prefix="kagent-trusted-cost-")
    jd = judge_mod.Judge(log)
    timeouts = {"start": 120.0, "verify": 15.0, "benchmark": 60.0}
    t0 = time.perf_counter()
    # Launchers shared as in a run (the runtime names the directory: NVIDIA under bwrap).
    shared = os.path.join(log, "launchers", "shared") if prefix and device.startswith("cuda") else None
    jd.load(problem_path, device, "bfloat16", size, 0, 3, prefix, peak, 3, timeouts, repeat, launchers_dir=shared)
    load_s = time.perf_counter() - t0
    rows = {}
    for name, code in cands:
        if steady:
            jd.idle()  # between requests, as the server does (lean: the next worker starts only now)
            if jd.spares:
                jd.ready(jd.spares[0])  # the LLM's think time: the next worker is warm before the candidate arrives
        key = core.sha256(code)
        t0 = time.perf_counter()
        row = {}
        try:
            v = jd.verify(code, key, None, None)
            row["verify_s"] = time.perf_counter() - t0
            row["passed"] = v["passed"]
            row["verify_timings"] = v.get("timings")
            if v["passed"]:
                b = jd.benchmark(code, key, warmup, repeat, None, None)
                row["median_ms"] = b["candidate"]["median_ms"]
                row["floor_pct"] = (b.get("floor_fraction") or 0) * 100
                row["phases_s"] = b.get("phases_s")
            else:
                row["error"] = (v.get("error") or "")[:160]
                jd.finish_current()
        except Exception as exc:  # noqa: BLE001 - a cheat or a failure: its reason is the result
            jd.finish_current()
            row["passed"] = False
            row["error"] = f"{type(exc).__name__}: {exc}"[:220]
        row["wall_s"] = time.perf_counter() - t0
        judge_mod.trace("candidate", name, "done", f"{row['wall_s']:.3f} s")
        rows[name] = row
        print("  judge", name, json.dumps(row)[:300], flush=True)
        jd.idle()
    jd.shutdown_workers()
    # The next pass loads the problem again: free this judge's inputs, references and slots first
    # (RMSNorm's are 3.7 GB each).
    jd.sets = jd.refs = jd.slots = jd.problem = None
    del jd
    import gc
    gc.collect()
    core.release()
    return load_s, rows


PASSES = ("before", "before_cold", "before_novel", "after_steady", "after_back_to_back", "sandbox_steady", "cheats")


def one_pass(name, a, core, judge_mod, problem, cands, tmp):
    """The rows of one pass (a judge pass adds its problem load time as "_load_s")."""
    if name in ("before", "before_cold", "before_novel"):
        return run_before(core, problem, a.device, a.size, cands, a.warmup, a.repeat, tmp, cold=name == "before_cold",
                          novel=name == "before_novel")
    prefix = bwrap_prefix(a.bwrap) if a.bwrap and name in ("sandbox_steady", "cheats") else []
    if name == "cheats":
        cands = [(p.name, p.read_text()) for p in sorted(pathlib.Path(a.cheats).glob("*.py"))]
    load_s, rows = run_judge(judge_mod, core, problem, a.device, a.size, cands, a.warmup, a.repeat, prefix,
                             a.peak_gbps, name != "after_back_to_back")
    rows["_load_s"] = load_s
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel-dir", required=True)
    ap.add_argument("--candidates", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--size", default=None)
    ap.add_argument("--cheats", default=None)
    ap.add_argument("--bwrap", default=None)
    ap.add_argument("--peak-gbps", type=float, default=None)
    ap.add_argument("--warmup", type=int, default=25)
    ap.add_argument("--repeat", type=int, default=100)
    ap.add_argument("--json", default=None)
    ap.add_argument("--skip-before", action="store_true")
    ap.add_argument("--no-back-to-back", action="store_true")
    ap.add_argument("--only-cheats", action="store_true")
    ap.add_argument("--only-pass", default=None, choices=PASSES,
                    help="internal: run this one pass in this process and write its rows to --json")
    a = ap.parse_args()
    if a.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
        a.size = a.size or "small"
    if a.size:
        os.environ["KAGENT_PROBLEM_SIZE"] = a.size
    import harness_core as core
    import judge as judge_mod
    problem = os.path.join(os.path.abspath(a.kernel_dir), "problem.py")
    cands = [("input.py", open(os.path.join(a.kernel_dir, "input.py")).read())] + candidates(a.candidates)
    tmp = tempfile.mkdtemp()
    report = {"kernel_dir": a.kernel_dir, "device": a.device, "warmup": a.warmup, "repeat": a.repeat}
    if a.only_cheats:
        corpus = [(p.name, p.read_text()) for p in sorted(pathlib.Path(a.cheats).glob("*.py"))]
        _, cheats = run_judge(judge_mod, core, problem, a.device, a.size, corpus, a.warmup, a.repeat,
                              bwrap_prefix(a.bwrap) if a.bwrap else [], a.peak_gbps, True)
        for name, r in cheats.items():
            print(f"  {name:26} {'VERIFIED' if r.get('passed') and 'median_ms' in r else 'rejected':9} "
                  f"{r.get('median_ms') or '':>10} {r.get('error', '')[:150]}")
        return
    if a.only_pass:
        rows = one_pass(a.only_pass, a, core, judge_mod, problem, cands, tmp)
        with open(a.json, "w") as f:
            json.dump(rows, f, default=str)
        return
    gpu_before = ["before_cold", "before_novel"] if a.device.startswith("cuda") else []
    wanted = ([] if a.skip_before else ["before"] + gpu_before) + \
        ["after_steady"] + ([] if a.no_back_to_back else ["after_back_to_back"]) + \
        (["sandbox_steady"] if a.bwrap else []) + (["cheats"] if a.cheats else [])
    own_args = list(sys.argv[1:])
    if "--json" in own_args:  # the passes write their own; this invocation writes the report
        i = own_args.index("--json")
        del own_args[i:i + 2]
    for name in wanted:
        out = os.path.join(tmp, f"pass_{name}.json")
        argv = [sys.executable, os.path.abspath(__file__)] + own_args + ["--only-pass", name, "--json", out]
        print(f"== pass {name} (a process of its own)", flush=True)
        rc = subprocess.run(argv).returncode
        rows = json.load(open(out)) if rc == 0 and os.path.exists(out) else {}
        if rc != 0:
            print(f"   pass {name} failed (exit {rc}); its rows are left out", flush=True)
        if name in ("after_steady", "sandbox_steady") and rows:
            report[name.replace("steady", "load_s")] = rows.get("_load_s")
        if name == "after_steady" and rows:
            report["after_load_s"] = rows.pop("_load_s", None)
        rows.pop("_load_s", None)
        report[name] = rows
    for name in PASSES:
        report.setdefault(name, {})

    if a.skip_before:
        # No "before" to compare with: the judge's own rows and the cheat corpus's verdicts.
        for name, r in report["after_steady"].items():
            print(f"  {name:26} {r.get('wall_s', float('nan')):8.3f} s {'ok' if r.get('passed') else 'FAIL':4} "
                  f"{r.get('median_ms') or float('nan'):10.4f} ms")
        print_cheats(report["cheats"])
        write_report(a.json, report)
        return
    print(f"== {a.kernel_dir} on {a.device} (warmup {a.warmup}, repeat {a.repeat}) ==")
    keys = ["before"] + gpu_before + ["after_steady"] + ([] if a.no_back_to_back else ["after_back_to_back"]) + \
        (["sandbox_steady"] if a.bwrap else [])
    print(f"{'candidate':16} " + " ".join(f"{k:>20}" for k in keys) + f" {'before ms':>10} {'after ms':>10} "
          f"{'do_bench':>10} {'floor %':>8}")
    for name, _ in cands:
        b = report["before"].get(name, {})
        s = report["after_steady"].get(name, {})
        cells = []
        for k in keys:
            r = report[k].get(name, {})
            cells.append(f"{r.get('wall_s', float('nan')):>9.3f}s {'ok' if r.get('passed') else 'FAIL':>4}")
        print(f"{name:16} " + " ".join(f"{c:>20}" for c in cells) +
              f" {b.get('median_ms') or float('nan'):>10.4f} {s.get('median_ms') or float('nan'):>10.4f}"
              f" {b.get('do_bench_ms') or float('nan'):>10.4f} {s.get('floor_pct') or float('nan'):>8.1f}")
    for k in keys:
        walls = [r["wall_s"] for r in report[k].values() if r.get("passed")]
        print(f"median per verified candidate, {k}: {med(walls):.3f} s")
    # Where a judged candidate's time goes (medians over the verified candidates), per judge pass.
    for k in ("after_steady", "sandbox_steady"):
        steady = [r for r in report[k].values() if r.get("passed") and r.get("phases_s")]
        if not steady:
            continue
        parts = {"verify": [r["verify_s"] for r in steady],
                 "verify_first_call": [r["verify_timings"]["first_call_s"] for r in steady
                                       if (r.get("verify_timings") or {}).get("first_call_s") is not None]}
        for t in ("take_and_load_s", "compare_s"):
            parts["verify_" + t] = [r["verify_timings"][t] for r in steady if t in (r.get("verify_timings") or {})]
        for t in steady[0]["phases_s"]:
            parts[t] = [r["phases_s"][t] for r in steady if t in r["phases_s"]]
        print(f"judge phases, {k} (median s): " + ", ".join(f"{t} {med(v):.3f}" for t, v in parts.items() if v))
    agree = [abs(report["after_steady"][n]["median_ms"] / report["before"][n]["do_bench_ms"] - 1) * 100
             for n, _ in cands if report["after_steady"].get(n, {}).get("median_ms")
             and report["before"].get(n, {}).get("do_bench_ms")]
    if agree:
        print(f"judge median vs do_bench: max deviation {max(agree):.2f} %, median {med(agree):.2f} %")
    for k in ("sandbox_steady",):
        dev = [abs(report[k][n]["median_ms"] / report["before"][n]["do_bench_ms"] - 1) * 100
               for n, _ in cands if k in report and report[k].get(n, {}).get("median_ms")
               and report["before"].get(n, {}).get("do_bench_ms")]
        if dev:
            print(f"{k} median vs do_bench: max deviation {max(dev):.2f} %, median {med(dev):.2f} %, per kernel "
                  + ", ".join(f"{n}: {report[k][n]['median_ms']:.4f}" for n, _ in cands if report[k].get(n, {}).get("median_ms")))
    if a.cheats:
        print("cheat corpus:")
        print_cheats(report["cheats"])
    write_report(a.json, report)


def print_cheats(rows):
    for name, r in rows.items():
        print(f"  {name:26} {'VERIFIED' if r.get('passed') and 'median_ms' in r else 'rejected':9} "
              f"{r.get('error', '')[:150]}")


def write_report(path, report):
    if path:
        with open(path, "w") as f:
            json.dump(report, f, indent=1, default=str)


if __name__ == "__main__":
    main()
