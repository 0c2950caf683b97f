#!/bin/bash
# Issue 14, "a parent's profile <= 3 s": the same full run (run_trusted.sh run: beam 2x3, 2 rounds,
# matvec, instant replay replies, real ncu, sandboxed) twice, side by side on one machine: with the
# standby profiler off (KAGENT_NCU_STANDBY=0: a fresh ncu per profile, as before) and on (the
# default); RUN=run_rmsnorm does it on RMSNorm. The profile cache is off in both (KAGENT_CACHE_DIR=off), so every profile runs ncu. Then,
# with BUSY=1, busy_wide (20 s LLM replies) with the standby on, and with LEAN=1 the cost of trust on
# RMSNorm with the judge choosing its memory mode itself (trusted_cost.py, sandboxed: on an 80 GB card
# the lean mode must kick in by itself). CHECKS=1: busy_wide twice, with the starting kernel's checks
# before its analysis (KAGENT_START_CHECKS=first) and overlapping it (default); MODES= (empty) skips the
# off/on pair. TESTSB=1: RUN twice, test.py fresh (KAGENT_TEST_STANDBY=0) and started ahead (default).
# PROBE=1: probe_user_test.py (where a test.py run's seconds go). One file comes back: $OUT/sb.tgz.
# From the repository root with .device/ packed (pack_device.sh), carry [".device"].
set -u
root=$(pwd); final=${OUT:?}; out=/tmp/sb; rm -rf $out; mkdir -p $out
pack() {
  find $out -name '*.so' -delete
  find $out \( -name '*inductor*' -o -name '.triton_cache' -o -name 'program_*.db' \) -prune -exec rm -rf {} + 2>/dev/null
  tar czf $final/sb.tmp -C /tmp sb && mv $final/sb.tmp $final/sb.tgz
}
trap pack EXIT
T0=$(date +%s)
export KAGENT_CACHE_DIR=off
for mode in ${MODES-off on}; do
  [ $mode = on ] && export KAGENT_NCU_STANDBY=1 || export KAGENT_NCU_STANDBY=0
  RUN_LIMIT_S=${RUN_S:-200} bash benchmarks/h200/run_trusted.sh $out/$mode ${RUN:-run} > $out/$mode.sh.txt 2>&1
  d=$(ls -d $out/$mode/runs/*/ | head -1)
  # Each profile's invocations: name, wall time, verdict (the standby's lead is in the verdict).
  find "$d" -name invocations.jsonl | sort | while read -r f; do
    python3 -c "import json,sys
for l in open(sys.argv[1]):
    if l.strip():
        r=json.loads(l); print(sys.argv[1].split('/runs/')[1], r['name'], round(r['wall_s'],2), r['verdict'][:140])" "$f"
  done > $out/$mode/invocations.txt 2>&1
  grep -h '"profile' "$d"/events.jsonl | cut -c1-300 > $out/$mode/profile_events.txt 2>/dev/null
  rm -rf "$d"/workers "$d"/profiles/*/.triton_cache
  echo "$mode done at $(( $(date +%s)-T0 ))" >> $out/times.txt
  pack
done
if [ "${BUSY:-0}" = 1 ]; then
  export KAGENT_NCU_STANDBY=1
  RUN_LIMIT_S=${BUSY_S:-330} bash benchmarks/h200/run_trusted.sh $out/busy busy_wide > $out/busy.sh.txt 2>&1
  echo "busy done at $(( $(date +%s)-T0 ))" >> $out/times.txt
fi
if [ "${CHECKS:-0}" = 1 ]; then
  # The starting kernel's checks (test.py, eager and torch.compile timings) before its analysis, as
  # before 2026-12-05, then overlapping its LLM wait (the default): busy_wide side by side.
  export KAGENT_NCU_STANDBY=1
  for order in first overlap; do
    KAGENT_START_CHECKS=$order RUN_LIMIT_S=${BUSY_S:-270} bash benchmarks/h200/run_trusted.sh $out/checks_$order busy_wide \
      > $out/checks_$order.sh.txt 2>&1
    echo "checks_$order done at $(( $(date +%s)-T0 ))" >> $out/times.txt
    pack
  done
fi
if [ "${TESTSB:-0}" = 1 ]; then
  # test.py in a process started ahead (default) against a fresh one (KAGENT_TEST_STANDBY=0): the same
  # run (RUN, default run: instant replies) side by side; each test.py's time is in user_test_s.
  export KAGENT_NCU_STANDBY=1
  for sb in 0 1; do
    KAGENT_TEST_STANDBY=$sb RUN_LIMIT_S=${RUN_S:-200} bash benchmarks/h200/run_trusted.sh $out/testsb_$sb ${RUN:-run} \
      > $out/testsb_$sb.sh.txt 2>&1
    echo "testsb_$sb done at $(( $(date +%s)-T0 ))" >> $out/times.txt
    pack
  done
fi
if [ "${PROBE:-0}" = 1 ]; then
  timeout 150 python3 benchmarks/h200/probe_user_test.py > $out/probe_user_test.txt 2>&1
  echo "probe done at $(( $(date +%s)-T0 ))" >> $out/times.txt
fi
if [ "${LEAN:-0}" = 1 ]; then
  mkdir -p $out/lean
  timeout ${LEAN_S:-220} python3 benchmarks/trusted_cost.py --kernel-dir examples/optimize_02_rmsnorm \
    --candidates benchmarks/h200/replay_rmsnorm --peak-gbps 4800 --warmup 10 --repeat 50 --no-back-to-back \
    --bwrap $root/.device/probe/bwrap.sh --json $out/lean/cost_rmsnorm.json > $out/lean/cost_rmsnorm.txt 2>&1
  echo "rc=$? at $(( $(date +%s)-T0 ))" >> $out/lean/cost_rmsnorm.txt
  grep -rh "judge:" /tmp/kagent-trusted-cost-*/ > $out/lean/judge_lines.txt 2>&1
  nvidia-smi --query-gpu=memory.total --format=csv,noheader >> $out/lean/judge_lines.txt 2>&1
fi
