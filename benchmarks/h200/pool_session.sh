#!/bin/bash
# One device call: the cheat corpus (full-size matvec, sandboxed) with this tree's judge and with the
# harness of an earlier commit (.device/before_tree/, see speed_session.sh), so that
# tests/cheats/matvec/scribble_segment.py shows what the slots' private pool changes; then
# speed_session.sh (this tree against the earlier one, side by side). One file comes back,
# $OUT/pool.tgz. From the repository root with .device/ packed (pack_device.sh), carry [".device"].
set -u
root=$(pwd); final=${OUT:?}; out=/tmp/pool; rm -rf $out; mkdir -p $out
trap 'tar czf $final/pool.tmp -C /tmp pool sp 2>/dev/null; mv $final/pool.tmp $final/pool.tgz' EXIT
bw=$root/.device/probe/bwrap.sh
for tree in . .device/before_tree; do
  tag=new; [ "$tree" = . ] || tag=old
  timeout ${CHEATS_S:-150} python3 $tree/benchmarks/trusted_cost.py --kernel-dir examples/optimize_01_matvec \
    --candidates benchmarks/h200/replay_matvec --cheats tests/cheats/matvec --bwrap $bw --peak-gbps 4800 \
    --warmup 10 --repeat 50 --only-cheats > $out/cheats_$tag.txt 2>&1
  echo "rc=$? at $(date +%T)" >> $out/cheats_$tag.txt
  grep -E "scribble|zeros" $out/cheats_$tag.txt | cut -c1-300
done
[ "${SPEED:-1}" = 1 ] && OUT=$out bash benchmarks/h200/speed_session.sh
