#!/usr/bin/env python3
"""Where the device idles in a run of `run_trusted.sh OUT busy_wide*` (RESULTS.md, 2026-12-04 evening).

Reads events_MODE.jsonl and files_MODE.txt (modification time, size and path of every file the run
wrote) and rebuilds the device's work from the files each step leaves:
  initial      run start -> the `initial` event (evaluator start, test.py, verify, timing)
  profile P    profile_baseline_P/*_kernel.py -> P/bottleneck_prompt.txt (ncu on the parent)
  candidate C  C/kernel.py (the reply arrived) -> C/N_reflexion_prompt.txt, or C/verify_0.log when
               it failed (queueing behind other device steps included)
  final        profile_*_final/*_kernel.py -> its invocations.jsonl
The union of these intervals is the time the device had work (the evaluator runs one step at a
time and takes the next at once); its complement, the idle gaps, are listed with what the run was
waiting for. Optionally an nvidia-smi log (smi_MODE.csv, 0.5 s samples) gives the share of samples
with a kernel running.

  busy_timeline.py DIR MODE
"""
import collections
import datetime as dt
import json
import pathlib
import re
import sys


def ts(s):
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def main(d, mode):
    d = pathlib.Path(d)
    ev = [json.loads(l) for l in open(d / f"events_{mode}.jsonl") if l.strip()]
    files = []
    for line in open(d / f"files_{mode}.txt"):
        t, size, path = line.rstrip("\n").split(" ", 2)
        files.append((float(t), path))
    t0 = ts(ev[0]["ts"])
    t_end = ts(ev[-1]["ts"])
    by_path = collections.defaultdict(list)
    for t, p in files:
        by_path[p].append(t)

    def first(pattern):
        hits = [t for t, p in files if re.fullmatch(pattern, p)]
        return min(hits) if hits else None

    iv = []  # (start, end, label)
    initial = next(ts(e["ts"]) for e in ev if e["type"] == "initial")
    iv.append((t0, initial, "initial"))
    for e in ev:
        if e["type"] == "analysis_start":
            pid = e["parent_id"]
            s = first(rf"baseline_profiles/{pid}/profile_baseline_{pid}/baseline_{pid}_kernel\.py")
            f = first(rf"baseline_profiles/{pid}/bottleneck_prompt\.txt")
            if s and f:
                iv.append((s, f, f"profile {pid}"))
    results = {e["candidate_id"]: e for e in ev if e["type"] == "candidate_result"}
    starts = {e["candidate_id"]: ts(e["ts"]) for e in ev if e["type"] == "candidate_start"}
    user_tests = []
    for cid, r in results.items():
        s = first(rf"candidates/{cid}/kernel\.py")
        f = first(rf"candidates/{cid}/\d+_reflexion_prompt\.txt") or first(rf"candidates/{cid}/verify_0\.log")
        if s and f:
            iv.append((s, f, f"candidate {cid}"))
        ut0, ut1 = first(rf"candidates/{cid}/user_test/kernel\.py"), first(rf"candidates/{cid}/user_test\.log")
        if ut0 and ut1:
            user_tests.append((cid, ut1 - ut0))
    s = first(r"candidates/[^/]+/profile_[^/]+_final/[^/]+_final_kernel\.py")
    f = first(r"candidates/[^/]+/profile_[^/]+_final/invocations\.jsonl")
    if s and f:
        iv.append((s, f, "final profile"))

    iv.sort()
    merged = []
    for s, f, label in iv:
        if merged and s <= merged[-1][1] + 0.05:
            merged[-1][1] = max(merged[-1][1], f)
        else:
            merged.append([s, f])
    busy = sum(f - s for s, f in merged)
    wall = t_end - t0
    print(f"{mode}: wall {wall:.1f} s (first to last event), device had work {busy:.1f} s = {100 * busy / wall:.1f} %")
    dev = sum(r.get("device_s", 0) for r in results.values())
    ana = sum(e.get("device_s", 0) for e in ev if e["type"] == "analysis")
    print(f"  device_s reported: candidates {dev:.1f} s, parent analyses {ana:.1f} s")
    print(f"  test.py runs (user_test: best): {len(user_tests)}, {sum(u[1] for u in user_tests):.1f} s: "
          + ", ".join(f"{c} {x:.1f}" for c, x in sorted(user_tests)))
    ok = [r for r in results.values() if r.get("ok")]
    small = sorted(r["device_s"] for r in results.values() if r["candidate_id"] not in dict(user_tests))
    if small:
        print(f"  device_s of candidates without test.py: median {small[len(small) // 2]:.2f} s, "
              f"min {small[0]:.2f}, max {small[-1]:.2f} ({len(small)} candidates, {len(ok)} verified in all)")
    print("  idle gaps >= 2 s (seconds from the run's start):")
    gaps, prev = [], t0
    for s, f in merged:
        if s - prev >= 2:
            gaps.append((prev, s))
        prev = max(prev, f)
    if t_end - prev >= 2:
        gaps.append((prev, t_end))
    for a, b in gaps:
        # Candidates in flight during the gap: none of them had device work, so all were in LLM calls.
        inflight = [c for c in starts if starts[c] < b and ts(results[c]["ts"]) > a]
        print(f"    {a - t0:6.1f} - {b - t0:6.1f}  {b - a:5.1f} s  candidates in flight (all in LLM calls): {len(inflight)}")
    print(f"  idle in gaps >= 2 s: {sum(b - a for a, b in gaps):.1f} s")
    for e in ev:
        if e["type"] in ("concurrency", "analysis_start", "analysis"):
            print(f"  {ts(e['ts']) - t0:6.1f} {e['type']} "
                  + " ".join(f"{k}={e[k]}" for k in ("num_workers", "reason", "parent_id", "device_s", "llm_s") if k in e))
    smi = d / f"smi_{mode}.csv"
    if smi.exists():
        util = []
        for line in open(smi):
            parts = [p.strip() for p in line.split(",")]
            if len(parts) >= 2 and parts[1].endswith("%"):
                util.append(int(parts[1].rstrip(" %")))
        if util:
            print(f"  nvidia-smi: {len(util)} samples, kernel running in {100 * sum(u > 0 for u in util) / len(util):.1f} % of them, "
                  f"mean utilization.gpu {sum(util) / len(util):.1f} %")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
