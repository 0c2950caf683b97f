#!/bin/bash
# One device call (about 450 s) that returns everything as one file, $OUT/c5.tgz: the cost of trust on
# both examples (trusted_cost.py, with a cProfile of each worker's load and first verify call in
# prof_*/), and, on the CPU beside it, node scaling with enough candidates per round that the devices,
# not the chain of LLM replies, bound the run. From the repository root with .device/ packed
# (benchmarks/h200/pack_device.sh), carry [".device"]. SANDBOX=1 adds a pass with every worker under the
# carried bubblewrap; SCALING=0 leaves node scaling out.
set -u
root=$(pwd); final=${OUT:?}; out=/tmp/c5; rm -rf $out; mkdir -p $out/scaling $out/prof_matvec $out/prof_rmsnorm
pack() { tar czf $final/c5.tmp -C /tmp c5 && mv $final/c5.tmp $final/c5.tgz; }
trap pack EXIT
T0=$(date +%s)
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; nproc; } > $out/machine.txt 2>&1
[ "${SCALING:-1}" = 1 ] && ( export LD_LIBRARY_PATH=$root/.device/lib KAGENT_HOME=$root KAGENT_PYTHON=python3
  timeout ${SCALING_S:-420} python3 benchmarks/nodes_scaling.py --binary .device/kagent-actors --delay 1 --rounds 1 \
    --samples ${SAMPLES:-16} --schedule async --sizes 1 4 2 > $out/scaling/out.txt 2>&1; echo "rc=$?" >> $out/scaling/out.txt ) &
sp=$!
bw=(); [ "${SANDBOX:-0}" = 1 ] && bw=(--bwrap $root/.device/probe/bwrap.sh)
KAGENT_WORKER_PROFILE=$out/prof_matvec timeout 200 python3 benchmarks/trusted_cost.py --kernel-dir examples/optimize_01_matvec \
  --candidates benchmarks/h200/replay_matvec --peak-gbps 4800 --warmup 10 --repeat 50 --no-back-to-back "${bw[@]}" \
  --json $out/cost_matvec.json > $out/cost_matvec.txt 2>&1
echo "rc=$? at $(( $(date +%s)-T0 ))" >> $out/cost_matvec.txt
pack
KAGENT_WORKER_PROFILE=$out/prof_rmsnorm timeout 200 python3 benchmarks/trusted_cost.py --kernel-dir examples/optimize_02_rmsnorm \
  --candidates benchmarks/h200/replay_rmsnorm --peak-gbps 4800 --warmup 10 --repeat 50 --no-back-to-back "${bw[@]}" \
  --json $out/cost_rmsnorm.json > $out/cost_rmsnorm.txt 2>&1
echo "rc=$? at $(( $(date +%s)-T0 ))" >> $out/cost_rmsnorm.txt
pack
[ "${SCALING:-1}" = 1 ] && wait $sp
