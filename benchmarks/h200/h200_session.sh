#!/bin/bash
# One device call on the issue's machine (an H200) that gathers the two issues' figures at once: the
# cost of trust on both examples with the GPU cheat corpus (trust_session.sh, $OUT/ts.tgz), then the
# realistic second run of matvec (ahead_session.sh PART=runs, $OUT/ah.tgz; WHAT=run_rmsnorm for
# RMSNorm). From the repository root with .device/ packed (pack_device.sh), carry [".device"].
# TRUST=0 leaves the cost passes out; TAGS as in ahead_session.sh (default C2a).
set -u
export OUT=${OUT:?}
if [ "${TRUST:-1}" = 1 ]; then
  MATVEC_S=${MATVEC_S:-150} RMSNORM_S=${RMSNORM_S:-120} timeout 290 bash benchmarks/h200/trust_session.sh
  grep -hE "median|rejected|verified|rc=" /tmp/ts/cost_*.txt | cut -c1-200 | tail -60
fi
PART=runs TAGS=${TAGS:-C2a} timeout ${RUNS_S:-290} bash benchmarks/h200/ahead_session.sh
grep -E "^(A|C|F|L)|given back|within" /tmp/ah/summary.txt | cut -c1-220
exit 0
