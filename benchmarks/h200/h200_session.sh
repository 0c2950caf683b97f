#!/bin/bash
# One device call on the issue's machine (an H200) that gathers the two issues' figures at once: the
# cost of trust on both examples with the GPU cheat corpus (trust_session.sh, $OUT/ts.tgz), the
# realistic second run of matvec (ahead_session.sh PART=runs, $OUT/ah_run.tgz) and of RMSNorm
# ($OUT/ah_run_rmsnorm.tgz). From the repository root with .device/ packed (pack_device.sh), carry
# [".device"]. PROBE=0 leaves out the timed loop's probe (probe_loop_parts.py); TRUST=0 the cost passes; TAGS / RMS_TAGS as in ahead_session.sh (empty
# RMS_TAGS: no RMSNorm runs); *_S: each part's limit in seconds.
set -u
export OUT=${OUT:?}
if [ "${PROBE:-1}" = 1 ]; then
  # Where the timed loop's per-call cost goes (probe_loop_parts.py): each watch left out in turn, and
  # what a recording session adds per CUDA call (kineto, which traces the CUDA runtime through CUPTI,
  # against PyTorch's execution-trace observer). Written to $OUT/parts_*.txt.
  for ex in matvec:optimize_01_matvec rmsnorm:optimize_02_rmsnorm; do
    timeout ${PROBE_S:-120} python3 benchmarks/h200/probe_loop_parts.py --kernel-dir examples/${ex#*:} \
      --candidate benchmarks/h200/replay_${ex%%:*}/optimize_001.md --rounds 5 > $OUT/parts_${ex%%:*}.txt 2>&1
    echo "rc=$?" >> $OUT/parts_${ex%%:*}.txt
    grep -vE "^\[W|^ERROR" $OUT/parts_${ex%%:*}.txt | tail -20
  done
fi
if [ "${TRUST:-1}" = 1 ]; then
  MATVEC_S=${MATVEC_S:-130} RMSNORM_S=${RMSNORM_S:-100} timeout ${TRUST_S:-240} bash benchmarks/h200/trust_session.sh
  grep -hE "median|rejected|verified|rc=" /tmp/ts/cost_*.txt | cut -c1-200 | tail -40
fi
runs() {  # what tags limit
  [ -n "$2" ] || return 0
  WHAT=$1 PART=runs TAGS=$2 timeout $3 bash benchmarks/h200/ahead_session.sh
  mv $OUT/ah.tgz $OUT/ah_$1.tgz
  grep -E "^(A|C|D|F|L)[0-9a-z]* device_s" /tmp/ah/summary.txt | cut -c1-200
}
runs run "${TAGS-C2a D1a C2b D1b}" ${RUNS_S:-210}
runs run_rmsnorm "${RMS_TAGS-C2a}" ${RMS_RUNS_S:-130}
exit 0
