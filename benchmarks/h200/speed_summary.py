"""Summarises speed_session.sh: per pass file, the median wall time per verified candidate (the
starting kernel included, as trusted_cost.py counts), the judge's phases, and the kernels' medians;
then old against new and both against before_novel."""
import json
import pathlib
import statistics
import sys

out = pathlib.Path(sys.argv[1])
rows = {}
for f in sorted(out.glob("*.json")):
    try:
        rows[f.stem] = {k: v for k, v in json.loads(f.read_text()).items() if not k.startswith("_")}
    except (OSError, ValueError):
        print(f"{f.stem}: no rows")


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def verified(tag):
    return {n: r for n, r in rows.get(tag, {}).items() if r.get("passed")}


per = {}
for tag in rows:
    v = verified(tag)
    per[tag] = med([r["wall_s"] for r in v.values()])
    phases = {}
    for r in v.values():
        for k, x in (r.get("phases_s") or {}).items():
            phases.setdefault(k, []).append(x)
        for k, x in (r.get("verify_timings") or {}).items():
            if isinstance(x, (int, float)):
                phases.setdefault("verify_" + k, []).append(x)
    print(f"{tag:18} {len(v):2} verified, median {per[tag]:.3f} s per candidate; "
          + ", ".join(f"{k} {med(x):.3f}" for k, x in sorted(phases.items())))
    # How long an honest first call took to its first compile or launch line (the judge's quiet
    # window on a GPU must stay far above this).
    fp = [r["verify_timings"]["first_progress_s"] for r in rows[tag].values()
          if isinstance(r, dict) and isinstance((r.get("verify_timings") or {}).get("first_progress_s"), (int, float))]
    if fp:
        print(f"{tag:18} first progress line of a first call: max {max(fp):.4f} s, median {med(fp):.4f} s over {len(fp)}")
for ex in ("matvec", "rmsnorm"):
    # The judge's medians against triton.testing.do_bench (the in-process `before` pass times each
    # kernel with it too).
    db = {n: r["do_bench_ms"] for t in rows if t.startswith(ex + "_before") for n, r in rows[t].items()
          if isinstance(r, dict) and r.get("do_bench_ms")}
    for t in sorted(rows):
        if not t.startswith(ex + "_new") or not db:
            continue
        dev = {n: abs(r["median_ms"] / db[n] - 1) * 100 for n, r in verified(t).items() if n in db and r.get("median_ms")}
        if dev:
            print(f"{t}: judge median vs do_bench over {len(dev)} kernels: max {max(dev.values()):.2f} %, "
                  f"median {med(list(dev.values())):.2f} %; " + ", ".join(f"{n} {v:.2f}" for n, v in sorted(dev.items())))
    novel = [per[t] for t in per if t.startswith(ex + "_novel")]
    old = [per[t] for t in per if t.startswith(ex + "_old")]
    new = [per[t] for t in per if t.startswith(ex + "_new")]
    if not (old and new):
        continue
    b = med(novel)
    print(f"{ex}: before_novel {b:.3f} s, old judge {med(old):.3f} s (+{med(old) - b:.3f}), "
          f"new judge {med(new):.3f} s (+{med(new) - b:.3f}); new/old {med(new) / med(old):.3f}")
    # The kernels' medians, old against new (the same kernels timed by both judges).
    names = sorted(set().union(*[verified(t).keys() for t in rows if t.startswith(ex + "_old") or t.startswith(ex + "_new")]))
    devs = []
    for n in names:
        o = [verified(t)[n]["median_ms"] for t in rows if t.startswith(ex + "_old") and n in verified(t)]
        w = [verified(t)[n]["median_ms"] for t in rows if t.startswith(ex + "_new") and n in verified(t)]
        if o and w:
            devs.append(abs(statistics.mean(w) / statistics.mean(o) - 1) * 100)
    if devs:
        print(f"{ex}: kernel medians, new judge against old: max {max(devs):.2f} %, median {med(devs):.2f} % over {len(devs)} kernels")
