#!/bin/bash
# One device call, two side-by-side comparisons (from the repository root with .device/ packed by
# pack_device.sh; carry [".device"]; files come back as $OUT/ah.tgz):
#  PART=runs  the next ncu standby started beside the batch it follows (KAGENT_NCU_STANDBY_AHEAD,
#             default on) against after it, and the device given back before ncu's report
#             (KAGENT_PROFILE_RELEASE, default on) against after it, on a realistic second run of matvec
#             (run_trusted.sh run: beam 2x3, 2 rounds, instant replay replies, real ncu, sandboxed):
#             a cold run A fills a cache; every profile is then removed from it except the starting
#             kernel's (a second run of the same directory profiles new candidates, not its start);
#             from that same cache state: C0 (as before both: KAGENT_NCU_STANDBY_AHEAD=0,
#             KAGENT_PROFILE_RELEASE=0), C1 (the standby ahead, the device kept until ncu's report)
#             and C2 (the default: ahead, and the device given back when the program has exited),
#             in the order of TAGS (default C0a C1a C2a C1b C2b); F0 is C2 with the standbys'
#             interpreter teardown kept after their work (KAGENT_FAST_EXIT=0); L1 is C2 with the
#             judge forced lean (KAGENT_JUDGE_LEAN=1: one worker at a time); D1 is C2 with one ncu
#             standby waiting instead of the GPU default of two (KAGENT_NCU_STANDBY=1).
#             WHAT=run_rmsnorm: the same runs on RMSNorm (run_trusted.sh run_rmsnorm).
#  PART=cost  the judge's replacement spares started beside a candidate's first call
#             (KAGENT_JUDGE_REFILL=take, default) or after its verification (=verified): trusted_cost.py
#             sandbox_steady passes on matvec, alternating take, verified, verified, take, between
#             two passes of the in-process design on kernels new to Triton's cache (before_novel).
set -u
root=$(pwd); final=${OUT:?}; out=/tmp/ah; rm -rf $out; mkdir -p $out
trap 'tar czf $final/ah.tmp -C /tmp ah && mv $final/ah.tmp $final/ah.tgz' EXIT
trap 'exit 143' TERM  # (timeout 570 bash ahead_session.sh: the files still come back)
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; nproc; } > $out/machine.txt 2>&1
# What the ncu front end is (a script that execs its binary, or one that stays as its parent) and,
# during run C1a, the process tree under each ncu sampled 3 times a second (command, executable): the
# facts a release of the device at the wrapper's exit (before ncu's report) must rest on.
{ for n in "$(command -v ncu)" /usr/local/cuda/bin/ncu; do
    [ -e "$n" ] || continue; echo "== $n"; ls -la "$n"; r=$(readlink -f "$n"); echo "real $r"; file "$r" 2>/dev/null
    if grep -Iq . "$r"; then head -60 "$r"; fi; done; } > $out/ncu_bin.txt 2>&1
sample_ps() {  # tag: until /tmp/ah/sampling is removed
  while [ -e $out/sampling ]; do
    echo "== $(date +%s.%N)"
    ps -eo pid,ppid,etimes,comm,args --no-headers | grep -E 'ncu|bwrap|profile_wrapper|python' | grep -v -E 'grep|ps -eo' | cut -c1-260
    for p in $(pgrep -f 'ncu|profile_wrapper'); do echo "exe $p $(readlink /proc/$p/exe)"; done
    sleep 0.3
  done > $out/ps_$1.txt 2>&1
}
summary() {  # dir
  python3 - "$1" "${WHAT:-run}" <<'PY'
import json, sys
d = sys.argv[1]
w = sys.argv[2]
s = json.load(open(d + "/summary_" + w + ".json"))
n = s.get("candidates") or 1
print(d.split("/")[-1], "device_s", round(s["device_s"], 2), "per candidate", round(s["device_s"] / n, 2),
      "candidates", n, "best", s.get("best_program_id"), s.get("best_ms"), "wall", round(s.get("session_wall_s", 0), 1),
      "test.py", round(s.get("user_test_s") or 0, 2))
for line in open(d + "/invocations_" + w + ".txt"):
    print("  ", line.rstrip()[:260])
try:
    for line in open(d + "/marks_" + w + ".txt"):
        print("  ", line.rstrip()[:260])
except OSError:
    pass
PY
}
one() {  # tag cache [env...]
  local tag=$1 cache=$2; shift 2
  env "$@" KAGENT_CACHE_DIR=$cache RUN_LIMIT_S=${RUN_S:-150} bash benchmarks/h200/run_trusted.sh $out/$tag ${WHAT:-run} \
    > $out/$tag.sh.txt 2>&1
  summary $out/$tag | tee -a $out/summary.txt
}
part=${PART:-runs}  # runs | cost | both (runs, then the cost passes without the in-process ones)
if [ $part != cost ]; then
  rm -rf /tmp/kcA /tmp/kcA.snap
  one A /tmp/kcA
  # Keep only the starting kernel's profile: the first one run A stored (its baseline profile comes
  # before any candidate's; a cache entry keeps no code to tell it by).
  python3 - /tmp/kcA/profiles <<'PY' | tee -a $out/summary.txt
import json, os, sys
d = sys.argv[1]
entries = sorted((json.load(open(os.path.join(d, f))).get("stored_at", ""), f) for f in os.listdir(d))
for i, (when, f) in enumerate(entries):
    j = json.load(open(os.path.join(d, f)))
    print("cache", f[:12], j.get("kernel_name"), when, "kept" if i == 0 else "removed")
    if i:
        os.remove(os.path.join(d, f))
PY
  cp -a /tmp/kcA /tmp/kcA.snap
  for tag in ${TAGS:-C0a C1a C2a C1b C2b}; do
    rm -rf /tmp/kcA && cp -a /tmp/kcA.snap /tmp/kcA
    # KAGENT_PROFILE_TRACE=1: the wrapper stamps its phases (batch received, batch done), so the
    # seconds from its last device work to ncu's exit can be told apart.
    [ $tag = C2a ] && { touch $out/sampling; sample_ps $tag & }
    case $tag in C0*) one $tag /tmp/kcA KAGENT_NCU_STANDBY_AHEAD=0 KAGENT_PROFILE_RELEASE=0 KAGENT_PROFILE_TRACE=1 ;;
                 C1*) one $tag /tmp/kcA KAGENT_PROFILE_RELEASE=0 KAGENT_PROFILE_TRACE=1 ;;
                 F0*) one $tag /tmp/kcA KAGENT_FAST_EXIT=0 KAGENT_PROFILE_TRACE=1 ;;
                 L1*) one $tag /tmp/kcA KAGENT_JUDGE_LEAN=1 KAGENT_PROFILE_TRACE=1 ;;
                 D1*) one $tag /tmp/kcA KAGENT_NCU_STANDBY=1 KAGENT_PROFILE_TRACE=1 ;;
                 *) one $tag /tmp/kcA KAGENT_PROFILE_TRACE=1 ;; esac
    rm -f $out/sampling; wait
  done
fi
if [ $part != runs ]; then
  bw=$root/.device/probe/bwrap.sh
  tags="novel_1 take_1 verified_1 verified_2 take_2 novel_2"; [ $part = both ] && tags="take_1 verified_1 verified_2 take_2"
  for tag in $tags; do
    pass=sandbox_steady; [ ${tag%_*} = novel ] && pass=before_novel
    timeout ${PASS_S:-150} env KAGENT_JUDGE_REFILL=${tag%_*} python3 benchmarks/trusted_cost.py \
      --kernel-dir $root/examples/optimize_01_matvec --candidates $root/benchmarks/h200/replay_matvec --bwrap $bw \
      --peak-gbps 4800 --warmup 10 --repeat 50 --only-pass $pass --json $out/$tag.json > $out/$tag.txt 2>&1
    echo "rc=$? at $(date +%T)" >> $out/$tag.txt
  done
  python3 benchmarks/h200/speed_summary.py $out > $out/cost_summary.txt 2>&1
  cat $out/cost_summary.txt
fi
exit 0
