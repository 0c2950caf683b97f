#!/bin/bash
# One device call: the judge's per-candidate cost, side by side with the harness of an earlier commit
# (.device/before_tree/: `git archive <rev> harness benchmarks/trusted_cost.py | tar -x -C
# .device/before_tree`), and the in-process design given kernels new to Triton's cache
# (before_novel). Passes alternate (before_novel, old judge, new judge, new judge, old judge,
# before_novel on matvec; before_novel, old, new on RMSNorm), each in a process of its own, sandboxed
# as runs are. One file comes back, $OUT/sp.tgz: rows in sp/*.json, summary.txt from
# benchmarks/h200/speed_summary.py. From the repository root with .device/ packed (pack_device.sh),
# carry [".device"]. ONLY=matvec|rmsnorm runs one example; DOBENCH=1 runs only the in-process pass
# with do_bench and this tree's judge, on both examples.
set -u
root=$(pwd); final=${OUT:?}; out=/tmp/sp; rm -rf $out; mkdir -p $out
pack() { tar czf $final/sp.tmp -C /tmp sp && mv $final/sp.tmp $final/sp.tgz; }
trap pack EXIT
bw=$root/.device/probe/bwrap.sh
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; nproc; } > $out/machine.txt 2>&1
one() {  # tree example replay pass tag
  timeout ${PASS_S:-120} python3 $1/benchmarks/trusted_cost.py --kernel-dir $root/examples/$2 \
    --candidates $root/benchmarks/h200/$3 --bwrap $bw --peak-gbps 4800 --warmup 10 --repeat 50 \
    --only-pass $4 --json $out/$5.json > $out/$5.txt 2>&1
  echo "rc=$? at $(date +%T)" >> $out/$5.txt
}
old=.device/before_tree
if [ "${DOBENCH:-0}" = 1 ]; then
  # Only the agreement with triton.testing.do_bench: the in-process `before` pass (which times every
  # kernel with do_bench too) and this tree's sandboxed judge, on both examples.
  for ex in matvec rmsnorm; do
    dir=optimize_01_matvec; [ $ex = rmsnorm ] && dir=optimize_02_rmsnorm
    one . $dir replay_$ex before ${ex}_before_1
    one . $dir replay_$ex sandbox_steady ${ex}_new_1
  done
  python3 benchmarks/h200/speed_summary.py $out > $out/summary.txt 2>&1
  cat $out/summary.txt
  exit 0
fi
if [ "${ONLY:-matvec}" != rmsnorm ]; then
  one $old optimize_01_matvec replay_matvec before_novel matvec_novel_1
  one $old optimize_01_matvec replay_matvec sandbox_steady matvec_old_1
  one . optimize_01_matvec replay_matvec sandbox_steady matvec_new_1
  one . optimize_01_matvec replay_matvec sandbox_steady matvec_new_2
  one $old optimize_01_matvec replay_matvec sandbox_steady matvec_old_2
  one $old optimize_01_matvec replay_matvec before_novel matvec_novel_2
fi
if [ "${ONLY:-rmsnorm}" != matvec ]; then
  one $old optimize_02_rmsnorm replay_rmsnorm before_novel rmsnorm_novel_1
  one $old optimize_02_rmsnorm replay_rmsnorm sandbox_steady rmsnorm_old_1
  one . optimize_02_rmsnorm replay_rmsnorm sandbox_steady rmsnorm_new_1
fi
python3 benchmarks/h200/speed_summary.py $out > $out/summary.txt 2>&1
cat $out/summary.txt
