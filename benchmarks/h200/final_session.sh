#!/bin/bash
# One device call (about 540 s) that returns one file, $OUT/c6.tgz: GPU busy behind 20 s LLM replies
# (run_trusted.sh busy_wide, the wide matvec search, real ncu) on the GPU and, on the CPU beside it,
# node scaling with enough candidates that the devices bound the run (nodes_scaling.py, 3 pipelines
# per device, throughput to the last result). Then, if time is left, the cost of trust on RMSNorm
# with the judge forced lean (KAGENT_JUDGE_LEAN=1). From the repository root with .device/ packed
# (benchmarks/h200/pack_device.sh), carry [".device"].
set -u
root=$(pwd); final=${OUT:?}; out=/tmp/c6; rm -rf $out; mkdir -p $out/scaling $out/busy $out/lean
pack() {
  find $out -name '*.so' -delete
  find $out \( -name '*inductor*' -o -name '.triton_cache' \) -prune -exec rm -rf {} + 2>/dev/null
  tar czf $final/c6.tmp -C /tmp c6 && mv $final/c6.tmp $final/c6.tgz
}
trap pack EXIT
T0=$(date +%s)
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; nproc; } > $out/machine.txt 2>&1
( export LD_LIBRARY_PATH=$root/.device/lib KAGENT_HOME=$root KAGENT_PYTHON=python3
  timeout ${SCALING_S:-470} python3 benchmarks/nodes_scaling.py --binary .device/kagent-actors --delay 1 --rounds 1 \
    --samples ${SAMPLES:-20} --per-device 3 --schedule async --sizes 1 4 2 > $out/scaling/out.txt 2>&1
  echo "rc=$? at $(( $(date +%s)-T0 ))" >> $out/scaling/out.txt ) &
sp=$!
if [ "${PROBE:-1}" = 1 ]; then
  # Where one ncu process's fixed cost goes (probe_ncu_fixed.py), on the replay set's first kernel.
  mkdir -p $out/probe
  timeout 150 python3 benchmarks/h200/probe_ncu_fixed.py --kernel-dir examples/optimize_01_matvec --kernel benchmarks/h200/replay_matvec/optimize_001.md \
    --name matvec_splitk_kernel --out $out/probe/out --reps 2 > $out/probe/out.txt 2>&1
  echo "rc=$? at $(( $(date +%s)-T0 ))" >> $out/probe/out.txt
  rm -rf $out/probe/out/cache_* $out/probe/out/warm_cache
  pack
fi
RUN_LIMIT_S=${BUSY_S:-380} bash benchmarks/h200/run_trusted.sh $out/busy busy_wide > $out/busy/sh.txt 2>&1
echo "busy done at $(( $(date +%s)-T0 ))" > $out/times.txt
rm -f $out/busy/program_busy_wide.db
pack
left=$(( ${TOTAL_S:-530} - ($(date +%s)-T0) ))
if [ $left -gt 90 ]; then
  KAGENT_JUDGE_LEAN=1 timeout $(( left - 10 )) python3 benchmarks/trusted_cost.py --kernel-dir examples/optimize_02_rmsnorm \
    --candidates benchmarks/h200/replay_rmsnorm --peak-gbps 4800 --warmup 10 --repeat 50 --no-back-to-back \
    --bwrap $root/.device/probe/bwrap.sh --json $out/lean/cost_rmsnorm.json > $out/lean/cost_rmsnorm.txt 2>&1
  echo "rc=$? at $(( $(date +%s)-T0 ))" >> $out/lean/cost_rmsnorm.txt
  pack
fi
wait $sp
echo "all done at $(( $(date +%s)-T0 ))" >> $out/times.txt
