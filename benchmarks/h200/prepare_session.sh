#!/bin/bash
# One device call: what the standbys' Triton preparation saves (launchers.prepare_triton: the judge's
# shared launchers, the driver's utilities, a compile of a harness kernel), side by side in one call.
#   A  cold matvec run (run_trusted.sh run: beam 2x3, 2 rounds, instant replay replies, real ncu,
#      sandboxed), an empty cache, KAGENT_STANDBY_PREPARE=0 (the standbys as before);
#   B  the same run with the preparation (the default), an empty cache of its own; meanwhile
#      nvidia-smi's compute apps and the waiting standbys are sampled (does a waiting test.py standby
#      hold a CUDA context? it must not);
#   C  a second run on B's cache with its profiles removed (the references and the starting kernel's
#      checks cached, every profile taken again, as in a second run whose LLM writes new kernels).
# RUNS="B" runs B alone. Files come back as $OUT/prep.tgz. From the repository root with .device/ packed, carry [".device"].
set -u
root=$(pwd); final=${OUT:?}; out=/tmp/prep; rm -rf $out /tmp/kcA /tmp/kcB; mkdir -p $out
trap 'tar czf $final/prep.tmp -C /tmp prep && mv $final/prep.tmp $final/prep.tgz' EXIT
export KAGENT_NCU_STANDBY=1
one() {  # tag cache [env...]
  local tag=$1 cache=$2; shift 2
  env "$@" KAGENT_CACHE_DIR=$cache RUN_LIMIT_S=${RUN_S:-110} bash benchmarks/h200/run_trusted.sh $out/$tag run \
    > $out/$tag.sh.txt 2>&1
  python3 - $out/$tag <<'PY'
import json, sys, glob
d = sys.argv[1]
s = json.load(open(d + "/summary_run.json"))
print(d.split("/")[-1], "device_s", round(s["device_s"], 1), "candidates", s.get("candidates_total"),
      "busy", round(s.get("gpu_busy_pct", 0), 1), "best", s.get("best_ms"), "wall", round(s.get("session_wall_s", 0), 1))
for line in open(d + "/profiles_run.txt"):
    print("  profile", line.split("/runs/")[-1].strip())
steps = open(d + "/device_steps_run.txt").read().splitlines()
for l in steps:
    if l.startswith("=="):
        cur = l
    elif "user_test_s" in l and json.loads(l).get("user_test_s"):
        j = json.loads(l)
        print("  test.py", cur.split("/")[2] if cur.count("/") > 2 else cur, j.get("user_test_s"))
PY
}
runs=" ${RUNS:-A B C} "  # RUNS="B": only B and its sampling
[[ $runs == *" A "* ]] && one A /tmp/kcA KAGENT_STANDBY_PREPARE=0
( for i in $(seq 1 120); do
    echo "t $(date +%s.%N)"; nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
    for p in $(pgrep -f "test_standby.py|profile_wrapper.py|worker.py"); do echo "proc $p $(tr '\0' ' ' < /proc/$p/cmdline | cut -c1-160)"; done
    sleep 1; done ) > $out/apps.txt 2>&1 &
smp=$!
one B /tmp/kcB
kill $smp 2>/dev/null
rm -rf /tmp/kcB/profiles
[[ $runs == *" C "* ]] && one C /tmp/kcB
exit 0
