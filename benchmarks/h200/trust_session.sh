#!/bin/bash
# One device call: the cost of trust on both examples with the sandbox, the in-process design also
# given kernels new to Triton's cache (before_novel, as every LLM-written kernel is), each judge pass's
# phases, and the GPU cheat corpus on full-size matvec (the committed spare rule: a spare beyond the
# first only where free memory allows). One file comes back: $OUT/ts.tgz. From the repository root
# with .device/ packed (pack_device.sh), carry [".device"]. ONLY=matvec|rmsnorm runs one example.
set -u
root=$(pwd); final=${OUT:?}; out=/tmp/ts; rm -rf $out; mkdir -p $out
pack() { tar czf $final/ts.tmp -C /tmp ts && mv $final/ts.tmp $final/ts.tgz; }
trap pack EXIT
T0=$(date +%s)
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; nproc; } > $out/machine.txt 2>&1
bw=$root/.device/probe/bwrap.sh
if [ "${ONLY:-matvec}" != rmsnorm ]; then
  timeout ${MATVEC_S:-330} python3 benchmarks/trusted_cost.py --kernel-dir examples/optimize_01_matvec \
    --candidates benchmarks/h200/replay_matvec --cheats tests/cheats/matvec --bwrap "$bw" --peak-gbps 4800 \
    --warmup 10 --repeat 50 --no-back-to-back --json $out/cost_matvec.json > $out/cost_matvec.txt 2>&1
  echo "rc=$? at $(( $(date +%s)-T0 ))" >> $out/cost_matvec.txt
  pack
fi
if [ "${ONLY:-rmsnorm}" != matvec ]; then
  timeout ${RMSNORM_S:-240} python3 benchmarks/trusted_cost.py --kernel-dir examples/optimize_02_rmsnorm \
    --candidates benchmarks/h200/replay_rmsnorm --bwrap "$bw" --peak-gbps 4800 \
    --warmup 10 --repeat 50 --no-back-to-back --json $out/cost_rmsnorm.json > $out/cost_rmsnorm.txt 2>&1
  echo "rc=$? at $(( $(date +%s)-T0 ))" >> $out/cost_rmsnorm.txt
fi
