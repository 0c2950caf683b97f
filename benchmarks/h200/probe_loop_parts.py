#!/usr/bin/env python3
"""What each watch of the judge's timed loop costs on a GPU (issue 11: the cost of trust is +0.33 s a
matvec candidate on an H100 against a target of +0.1 s, and the timed loop is most of it).

One process runs the worker's own loop (worker.Worker.op_time, the code the judge drives) around an
honest candidate, with the judge's answers given at once by a local channel, so that each variant
differs from the full loop by one watch only: the op recorder, the hook comparison, the stamps, the
flush. Variants alternate round by round; each figure is the median wall time of a whole loop
(warm-up + timed calls). The judge's own per-call work (thread count, the walk of its tree, a pipe
round trip) is timed apart, on this host.

Usage: probe_loop_parts.py --kernel-dir examples/optimize_01_matvec --candidate FILE.md|FILE.py
           [--warmup 10] [--repeat 50] [--rounds 5]"""
import argparse
import contextlib
import os
import random
import re
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "harness"))


class LocalChannel:
    """The judge's side of the timed loop, answered in process: the next stamp with each answer."""

    def __init__(self, stamps, warmup):
        self.stamps, self.warmup, self.pending = stamps, warmup, None

    def send(self, msg):
        if msg.get("ev") == "called":
            i = msg["i"]
            k = self.warmup + i + 1
            self.pending = {"keep": None, "stamp": self.stamps[k] if k < len(self.stamps) else None}

    def recv(self):
        out, self.pending = self.pending, None
        return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel-dir", required=True)
    ap.add_argument("--candidate", required=True)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--size", default=None)
    ap.add_argument("--flush-bytes", type=int, default=256 << 20)
    a = ap.parse_args()
    import worker as wm
    import judge as judge_mod
    import harness_core as core
    torch = core.torch_module()
    text = open(a.candidate, encoding="utf-8").read()
    m = re.search(r"```python\n(.*?)```", text, re.S)
    scratch = tempfile.mkdtemp(prefix="kagent-probe-parts-")
    cand = os.path.join(scratch, "kernel.py")
    with open(cand, "w", encoding="utf-8") as f:
        f.write(m.group(1) if m else text)
    if a.size:
        os.environ["KAGENT_PROBLEM_SIZE"] = a.size
    w = wm.Worker(scratch)
    ready = w.op_prepare({"problem": os.path.join(os.path.abspath(a.kernel_dir), "problem.py"), "device": a.device,
                          "dtype": "bfloat16", "size": a.size, "seeds": [0, 1, 2], "slots": [],
                          "flush_bytes": a.flush_bytes, "launcher_dir": None})
    print("ready:", {k: ready[k] for k in ("threads", "recorder")}, flush=True)
    w.op_load({"path": cand})
    out = w.call(w.sets[0])  # compiles
    w._sync()
    del out

    class J:
        sets = w.sets

        def trials(self):
            return len(self.sets)

        stamps_for = judge_mod.Judge.stamps_for

    full = {"recorder": True, "hooks": True, "stamps": True, "flush": True, "all_threads": True}
    variants = {
        "full loop (as the judge runs it)": {},
        "no op recorder": {"recorder": False},
        "recorder of one thread (no profile_all_threads)": {"all_threads": False},
        "no hook comparison": {"hooks": False},
        "no stamps": {"stamps": False},
        "no flush": {"flush": False},
        "bare loop (events, sync, pad only)": {"recorder": False, "hooks": False, "stamps": False, "flush": False},
    }
    hooks0, flush0, prof0 = w._hooks, w.flush_buf, wm.OpRecorder._profiler
    tiny = torch.empty(1, dtype=torch.int32, device=a.device)

    def one_thread_profiler():
        import torch.autograd.profiler as ap_
        return ap_.profile(use_device=None)

    results = {name: [] for name in variants}
    pads, issues = {name: [] for name in variants}, {}
    rng = random.Random(7)
    for r in range(a.rounds):
        for name, change in variants.items():
            cfg = dict(full, **change)
            stamps = judge_mod.Judge.loop_stamps(J(), a.warmup, a.repeat, rng) if cfg["stamps"] else \
                [[] for _ in range(a.warmup + a.repeat)]
            w._hooks = hooks0 if cfg["hooks"] else None
            w.hooks_seen = []
            w.flush_buf = flush0 if cfg["flush"] else tiny
            wm.OpRecorder._profiler = staticmethod(prof0 if cfg["all_threads"] else one_thread_profiler)
            if not cfg["recorder"]:
                w.recorder.loop_session = contextlib.nullcontext
                w.recorder.call_scope = contextlib.nullcontext
            else:
                w.recorder.__dict__.pop("loop_session", None)
                w.recorder.__dict__.pop("call_scope", None)
            req = {"warmup": a.warmup, "repeat": a.repeat, "stamps": stamps[:a.warmup + 1], "max_pad_us": 200.0}
            w._sync()
            t0 = time.perf_counter()
            reply = w.op_time(req, LocalChannel(stamps, a.warmup))
            wall = time.perf_counter() - t0
            results[name].append(wall)
            pads[name].append(reply["pad_us"])
            if r == a.rounds - 1:
                issues[name] = (statistics.median(reply["times_ms"]), reply["aten"], reply["hooks"], reply["marks"])
    w._hooks, w.flush_buf = hooks0, flush0
    wm.OpRecorder._profiler = prof0
    n = a.warmup + a.repeat
    base = statistics.median(results["full loop (as the judge runs it)"])
    print(f"\nworker timed loop, {a.warmup} warm-up + {a.repeat} timed calls, median of {a.rounds} rounds "
          f"(candidate {os.path.basename(a.candidate)})")
    print(f"{'variant':50} {'loop s':>8} {'per call ms':>12} {'saved s':>8} {'pad us':>7} {'median ms':>10}  aten/hooks/marks")
    for name in variants:
        s = statistics.median(results[name])
        med, aten, hooks, marks = issues[name]
        print(f"{name:50} {s:8.3f} {s / n * 1e3:12.3f} {base - s:8.3f} {statistics.median(pads[name]):7.1f} "
              f"{med:10.4f}  {aten or '-'} {hooks or '-'} {marks}")

    # What a recording session adds to the host's work per call (PyTorch's profiler with CPU activity
    # only still traces the CUDA runtime and driver through CUPTI: kineto's CPU activity types include
    # CUDA_RUNTIME and CUDA_DRIVER), against PyTorch's execution-trace observer, which records every
    # thread's ops with no CUPTI: one "call" = a tiny op, an event pair, a Triton launch, a sync.
    x = w.sets[0][0]
    small = torch.empty(1024, dtype=torch.int32, device=a.device)

    def api_calls(n):
        for _ in range(n):
            small.zero_()
            if a.device.startswith("cuda"):
                s_, e_ = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s_.record()
                wm.warm_triton(small)
                e_.record()
                torch.cuda.synchronize()
            else:
                wm.warm_triton(small)

    def per_call(label, ctx, n=200):
        api_calls(5)
        t0 = time.perf_counter()
        with ctx():
            t1 = time.perf_counter()
            api_calls(n)
            t2 = time.perf_counter()
        t3 = time.perf_counter()
        print(f"{label}: {(t2 - t1) / n * 1e6:.1f} us a call; session start {(t1 - t0) * 1e3:.2f} ms, "
              f"stop {(t3 - t2) * 1e3:.2f} ms", flush=True)

    @contextlib.contextmanager
    def kineto():
        prof = prof0()
        prof.__enter__()
        try:
            yield
        finally:
            prof.__exit__(None, None, None)
            list(prof.kineto_results.events())

    @contextlib.contextmanager
    def execution_trace():
        from torch.profiler import ExecutionTraceObserver
        path = os.path.join(scratch, "et.json")
        et = ExecutionTraceObserver().register_callback(path)
        et.start()
        try:
            yield
        finally:
            et.stop()
            et.unregister_callback()
            with open(path, encoding="utf-8") as f:
                f.read()

    del x
    with contextlib.suppress(Exception):
        per_call("no recording", contextlib.nullcontext)
        per_call("kineto session (the recorder's)", kineto)
        per_call("no recording, again", contextlib.nullcontext)
        per_call("execution-trace observer (no CUPTI)", execution_trace)

    # The judge's own work per timed call, on this host.
    pid = os.getpid()
    for label, fn in (("thread_count", lambda: judge_mod.thread_count(pid)),
                      ("new_below (the walk of the judge's tree)", lambda: judge_mod.new_below(os.getppid(), set(), pid, set())),
                      ("run_queue_wait_ms", lambda: judge_mod.run_queue_wait_ms(pid))):
        t0 = time.perf_counter()
        for _ in range(200):
            fn()
        print(f"judge per call: {label}: {(time.perf_counter() - t0) / 200 * 1e3:.3f} ms")
    r, wfd = os.pipe()
    r2, w2 = os.pipe()
    import threading

    def echo():
        for _ in range(200):
            os.write(w2, os.read(r, 64))
    th = threading.Thread(target=echo)
    th.start()
    t0 = time.perf_counter()
    for _ in range(200):
        os.write(wfd, b"x" * 32)
        os.read(r2, 64)
    th.join()
    print(f"pipe round trip between two threads (a floor for the judge's): {(time.perf_counter() - t0) / 200 * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
