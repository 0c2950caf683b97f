#!/bin/bash
# A short device call (about 200 s) that returns everything as ONE file: a device call brings back at
# most 8 files from $OUT, so results are tarred into $OUT/c4.tgz (after each stage, so that a call cut
# short still returns what was done). Run from the repository root on the device machine, with .device/
# packed (benchmarks/h200/pack_device.sh) and the probe's kernels in .device/pk/ (input.py and the
# replay set's optimize_00N.py code blocks), carry [".device"]:
#   ncu batch probe (GPU, ~60 s) | a full run (GPU, the rest) | nodes_scaling.py on the CPU beside them
set -u
root=$(pwd); final=${OUT:?}; out=/tmp/c4; rm -rf $out; mkdir -p $out/probe $out/scaling $out/trusted
pack() {
  find $out -name '*.so' -delete
  find $out \( -name '*inductor*' -o -name '.triton_cache' \) -prune -exec rm -rf {} + 2>/dev/null
  tar czf $final/c4.tmp -C /tmp c4 && mv $final/c4.tmp $final/c4.tgz
}
trap pack EXIT
T0=$(date +%s)
( export LD_LIBRARY_PATH=$root/.device/lib KAGENT_HOME=$root KAGENT_PYTHON=python3 KAGENT_BWRAP=$root/.device/probe/bwrap.sh
  timeout 200 python3 benchmarks/nodes_scaling.py --binary .device/kagent-actors --delay 1 --rounds 1 --samples 10 \
    --schedule async --sizes 1 4 2 > $out/scaling/out.txt 2>&1; echo "rc=$?" >> $out/scaling/out.txt ) &
sp=$!
ls .device/pk > $out/probe/kernels.txt
timeout 70 python3 benchmarks/h200/probe_ncu_batch.py --kernel-dir examples/optimize_01_matvec \
  --kernels .device/pk/input.py .device/pk/optimize_001.py .device/pk/optimize_007.py .device/pk/optimize_008.py \
  --names matvec_kernel matvec_splitk_kernel matvec_splitk_kernel matvec_splitk_kernel --out $out/probe --reps 1 \
  --only wrapper_1 wrapper_4 single_0 single_1 batch_2_marker batch_4_marker > $out/probe/out.txt 2>&1
echo "rc=$?" >> $out/probe/out.txt
echo "probe done at $(( $(date +%s)-T0 ))" > $out/times.txt
pack
RUN_LIMIT_S=$(( 200 - ($(date +%s)-T0) )) bash benchmarks/h200/run_trusted.sh $out/trusted run > $out/trusted/sh.txt 2>&1
echo "run done at $(( $(date +%s)-T0 ))" >> $out/times.txt
pack
wait $sp
