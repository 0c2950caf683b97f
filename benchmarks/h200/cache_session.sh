#!/bin/bash
# One device call: the same run (run_trusted.sh run: beam 2x3, 2 rounds, matvec, instant replay
# replies, real ncu, sandboxed) twice with one fresh KAGENT_CACHE_DIR, so the second run reads what the
# first stored (PyTorch reference timings, profiles); then busy_wide (20 s replies) with the cache off,
# the committed spare rule's run. One file comes back: $OUT/cs.tgz. From the repository root with
# .device/ packed (pack_device.sh), carry [".device"]. BUSY=0 leaves busy_wide out; RUN=run_rmsnorm runs
# the RMSNorm run twice instead.
set -u
root=$(pwd); final=${OUT:?}; out=/tmp/cs; rm -rf $out /tmp/cs_cache; mkdir -p $out
pack() {
  find $out -name '*.so' -delete
  find $out \( -name '*inductor*' -o -name '.triton_cache' -o -name 'program_*.db' \) -prune -exec rm -rf {} + 2>/dev/null
  tar czf $final/cs.tmp -C /tmp cs && mv $final/cs.tmp $final/cs.tgz
}
trap pack EXIT
T0=$(date +%s)
export KAGENT_NCU_STANDBY=1
for n in 1 2; do
  KAGENT_CACHE_DIR=/tmp/cs_cache RUN_LIMIT_S=${RUN_S:-170} bash benchmarks/h200/run_trusted.sh $out/run$n ${RUN:-run} > $out/run$n.sh.txt 2>&1
  echo "run$n done at $(( $(date +%s)-T0 ))" >> $out/times.txt
  pack
done
ls -la /tmp/cs_cache /tmp/cs_cache/* > $out/cache_listing.txt 2>&1
cat /tmp/cs_cache/references/*.json > $out/reference_entries.txt 2>&1
if [ "${BUSY:-1}" = 1 ]; then
  KAGENT_CACHE_DIR=off RUN_LIMIT_S=${BUSY_S:-300} bash benchmarks/h200/run_trusted.sh $out/busy busy_wide > $out/busy.sh.txt 2>&1
  echo "busy done at $(( $(date +%s)-T0 ))" >> $out/times.txt
fi
