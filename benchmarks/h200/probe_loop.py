#!/usr/bin/env python3
"""Where the judge's timed loop spends its per-call overhead on a GPU (issue 11, the cost of trust):
the calibrated overhead of the whole loop around a call that does nothing (the judge's own
calibration), and, timed alone on the problem's real inputs, its parts: the stamp that rolls a window
of each input and its undo, the L2 flush, and a pair of events with a synchronisation.

Usage: probe_loop.py --kernel-dir examples/optimize_01_matvec [--repeat 50]"""
import argparse
import os
import random
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "harness"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel-dir", required=True)
    ap.add_argument("--repeat", type=int, default=50)
    a = ap.parse_args()
    import harness_core as core
    import judge as judge_mod
    torch = core.torch_module()
    jd = judge_mod.Judge(tempfile.mkdtemp(prefix="kagent-probe-loop-"))
    timeouts = {"start": 120.0, "verify": 15.0, "benchmark": 60.0}
    problem = os.path.join(os.path.abspath(a.kernel_dir), "problem.py")
    jd.load(problem, "cuda", "bfloat16", None, 0, 3, [], 4800.0, 3, timeouts, a.repeat)
    print(f"calibrated loop overhead per call (the judge's, no-op call): {jd.calib['per_call_ms']:.3f} ms")
    inputs = jd.sets[0]
    rng = random.Random(1)
    stamps = jd.stamps_for(a.repeat, rng)
    sizes = [(k, t.numel() * t.element_size()) for k, t in enumerate(inputs) if torch.is_tensor(t)]
    print("inputs (index, bytes):", sizes)

    def timed(label, fn):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(a.repeat):
            fn(i)
        torch.cuda.synchronize()
        print(f"{label}: {(time.perf_counter() - t0) * 1e3 / a.repeat:.3f} ms per call")

    def stamp(i, undo=False):
        for k, start, length, shift in stamps[i]:
            view = inputs[k].view(-1)[start:start + length]
            view.copy_(view.roll(-shift if undo else shift))

    timed("stamp (roll of 1/16 of each input)", stamp)
    timed("stamp and its undo", lambda i: (stamp(i), stamp(i, undo=True)))
    flush = torch.empty(jd.flush_bytes // 4, dtype=torch.int32, device="cuda")
    timed("L2 flush (zero_ of 256 MiB)", lambda i: flush.zero_())

    def events(_i):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        e.record()
        torch.cuda.synchronize()
        s.elapsed_time(e)

    timed("two events, a synchronisation and elapsed_time", events)
    jd.shutdown_workers()


if __name__ == "__main__":
    main()
