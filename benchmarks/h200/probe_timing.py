#!/usr/bin/env python3
"""Why the judge's timed loop reads split-K kernels ~2 % slower than triton.testing.do_bench.

One process, one candidate at a time; every variant times the same call, interleaved in rounds so
that clock drift hits all of them alike. Variants (each adds one thing of the judge's loop):
  do_bench      triton.testing.do_bench(return_mode="median"), back to back, one sync at the end
  sync          flush, start event, call, end event, device sync per call (the old evaluator)
  sync_hook     + Triton launch hook registered (the judge counts launches)
  sync_stamp    + the judge's input stamp (a window of each input rolled) before the flush
  judge_like    hook + stamp + a pipe round trip per call (the keep question)
  pad<N>        judge_like + an N-microsecond GPU sleep queued before the start event
  queued        hook + stamp, no per-call sync (events read at the end)
Also prints the host time to issue one call (perf_counter around the call, no sync).

Usage: probe_timing.py --kernel-dir examples/optimize_01_matvec --candidates benchmarks/h200/replay_matvec
"""
import argparse
import json
import os
import pathlib
import random
import statistics
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "harness"))
import harness_core as core  # noqa: E402
from probe_compile import write_candidate  # noqa: E402 - same directory


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel-dir", required=True)
    ap.add_argument("--candidates", required=True)
    ap.add_argument("--only", default="input.py,optimize_004.md,optimize_007.md,optimize_009.md")
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    torch = core.torch_module()
    import triton
    from triton import knobs
    import triton.testing
    problem = core.Problem(os.path.join(a.kernel_dir, "problem.py"), "cuda", "bfloat16", None, 0)
    inputs = problem.fresh_inputs()
    flush = torch.empty((256 << 20) // 4, dtype=torch.int32, device="cuda")
    rng = random.Random(1)
    r_fd, w_fd = os.pipe()
    r2, w2 = os.pipe()
    hook_count = [0]

    def hook(*_a, **_k):
        hook_count[0] += 1

    tmp = tempfile.mkdtemp(prefix="probe-timing-")
    report = {}
    for name in a.only.split(","):
        path, code = write_candidate(name, a.kernel_dir, a.candidates, tmp)
        cand = core.load_candidate(path, code)
        args, kwargs = core.bind_arguments(cand.fn, inputs, problem.named)

        def call():
            return cand.fn(*args, **kwargs)

        for _ in range(5):
            call()
        torch.cuda.synchronize()
        tensors = [t for t in inputs if torch.is_tensor(t) and t.numel() >= 2 and t.is_contiguous()]

        def stamp():
            for t in tensors:
                n = max(2, t.numel() // 16)
                s = rng.randrange(0, t.numel() - n + 1)
                v = t.view(-1)[s:s + n]
                v.copy_(v.roll(rng.randrange(1, n)))

        def per_call(n, use_hook, use_stamp, pipe, pad_us, sync):
            if use_hook:
                knobs.runtime.launch_enter_hook.add(hook)
            evs = []
            try:
                for _ in range(n):
                    if use_stamp:
                        stamp()
                    flush.zero_()
                    if pad_us:
                        torch.cuda._sleep(int(pad_us * 1980))  # ~1.98 GHz SM clock: cycles per µs
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    s.record()
                    call()
                    e.record()
                    evs.append((s, e))
                    if sync:
                        torch.cuda.synchronize()
                    if pipe:
                        os.write(w_fd, b"k")
                        os.read(r_fd, 1)
                torch.cuda.synchronize()
            finally:
                if use_hook:
                    knobs.runtime.launch_enter_hook.remove(hook)
            return statistics.median(s.elapsed_time(e) for s, e in evs)

        variants = {
            "do_bench": lambda: triton.testing.do_bench(call, return_mode="median"),
            "sync": lambda: per_call(a.calls, False, False, False, 0, True),
            "sync_hook": lambda: per_call(a.calls, True, False, False, 0, True),
            "sync_stamp": lambda: per_call(a.calls, False, True, False, 0, True),
            "judge_like": lambda: per_call(a.calls, True, True, True, 0, True),
            "pad20": lambda: per_call(a.calls, True, True, True, 20, True),
            "pad100": lambda: per_call(a.calls, True, True, True, 100, True),
            "queued": lambda: per_call(a.calls, True, True, False, 0, False),
        }
        got = {k: [] for k in variants}
        for _ in range(a.rounds):
            for k, fn in variants.items():
                got[k].append(fn())
        # host time to issue one call, with and without the hook
        issue = {}
        for use_hook in (False, True):
            if use_hook:
                knobs.runtime.launch_enter_hook.add(hook)
            ts = []
            for _ in range(30):
                torch.cuda._sleep(int(2000 * 1980))  # keep the GPU busy so the host never waits
                t0 = __import__("time").perf_counter()
                call()
                ts.append((__import__("time").perf_counter() - t0) * 1e6)
                torch.cuda.synchronize()
            if use_hook:
                knobs.runtime.launch_enter_hook.remove(hook)
            issue["hook" if use_hook else "plain"] = round(statistics.median(ts), 1)
        med = {k: statistics.median(v) for k, v in got.items()}
        base = med["do_bench"]
        row = {k: {"ms": round(v, 4), "vs_do_bench_pct": round(100 * (v / base - 1), 2)} for k, v in med.items()}
        row["host_issue_us"] = issue
        report[name] = row
        print(name, json.dumps(row), flush=True)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
