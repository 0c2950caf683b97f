#!/bin/bash
# One device call (issue 14, GPU busy behind a slow LLM): the matvec run with 20 s LLM replies, async,
# num_workers: auto, without (busy_auto) and with launch-constant variants (busy_tune, tune_variants:
# 8), in the order of ORDER (default "busy_auto busy_tune"; busy_tune:32 sets 32 variants per kernel).
# From the repository root with .device/
# packed (pack_device.sh), carry [".device"]. Each run is bounded by RUN_S (default 260 s); files come
# back as $OUT/tune.tgz; the summary lines are printed.
set -u
final=${OUT:?}; out=/tmp/tu; rm -rf $out; mkdir -p $out
trap 'tar czf $final/tune.tmp -C /tmp tu && mv $final/tune.tmp $final/tune.tgz' EXIT
trap 'exit 143' TERM
for item in ${ORDER:-busy_auto busy_tune}; do
  what=${item%%:*}; n=${item#*:}; [ "$n" = "$item" ] && n=
  dir=$out/$what${n:+_$n}
  TUNE_VARIANTS=$n RUN_LIMIT_S=${RUN_S:-260} bash benchmarks/h200/run_trusted.sh $dir $what > $dir.sh.txt 2>&1
  python3 - $dir $what <<'PY' | tee -a $out/summary.txt
import json, re, sqlite3, sys
d, w = sys.argv[1], sys.argv[2]
try:
    s = json.load(open(f"{d}/summary_{w}.json"))
except OSError as e:
    print(w, "no summary:", e); sys.exit()
rows = sqlite3.connect(f"{d}/program_{w}.db").execute("select id, status, time_ms, bottleneck from programs").fetchall()
tuned = [r for r in rows if re.match(r"r\d+_t\d+$", r[0])]
llm = [r for r in rows if re.match(r"r\d+_c\d+$", r[0])]
print(d.split("/")[-1], "busy %", round(s.get("gpu_busy_pct") or 0, 1), "wall", round(s.get("session_wall_s") or s.get("wall_s") or 0, 1),
      "device_s", round(s.get("device_s") or 0, 1), "llm candidates", len(llm), "verified", sum(r[1] == "verified" for r in llm),
      "variants", len(tuned), "verified", sum(r[1] == "verified" for r in tuned),
      "best", s.get("best_program_id"), s.get("best_ms") or s.get("best_time_ms"))
for r in sorted(rows, key=lambda r: (r[2] is None, r[2] or 0))[:6]:
    print("  ", r)
PY
  tail -3 $dir/run_$what.log
done
exit 0
