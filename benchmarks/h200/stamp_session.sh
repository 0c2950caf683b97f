#!/bin/bash
# The judge's stamp side by side on one machine: trusted_cost.py's sandboxed judge pass with the
# harness of the commit before the change (.device/before_tree/: `git archive <rev> harness
# benchmarks/trusted_cost.py | tar -x -C .device/before_tree`) and with this tree's, alternating, on
# matvec (twice each) and RMSNorm (once each). Files under $OUT/st (one JSON of rows per pass).
set -u
root=$(pwd); out=${OUT:?}/st; mkdir -p $out
bw=$root/.device/probe/bwrap.sh
one() {  # tree example tag
  timeout 150 python3 $1/benchmarks/trusted_cost.py --kernel-dir $root/examples/$2 \
    --candidates $root/benchmarks/h200/$3 --bwrap $bw --peak-gbps 4800 --warmup 10 --repeat 50 \
    --only-pass sandbox_steady --json $out/$4.json > $out/$4.txt 2>&1
  echo "rc=$?" >> $out/$4.txt
}
one .device/before_tree optimize_01_matvec replay_matvec matvec_before_1
one . optimize_01_matvec replay_matvec matvec_after_1
one . optimize_01_matvec replay_matvec matvec_after_2
one .device/before_tree optimize_01_matvec replay_matvec matvec_before_2
one .device/before_tree optimize_02_rmsnorm replay_rmsnorm rmsnorm_before_1
one . optimize_02_rmsnorm replay_rmsnorm rmsnorm_after_1
