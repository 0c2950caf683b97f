#!/bin/bash
# The H200 session of benchmarks/RESULTS.md, run on the lent machine from the repository root with
# the binary and its shared libraries in .device/ (see RESULTS.md "How it was run"):
#   1. a full NVIDIA run per example (real verification, benchmarks and ncu profiles: baseline of
#      each parent, SOL of each verified candidate), with a replay set of kernels;
#   2. the per-profile cost, before (original design's wrapper) and after (ours), side by side.
# Usage: benchmarks/h200/run_h200.sh OUT
set -u
out=${1:?out}
root=$(pwd)
mkdir -p "$out"
export LD_LIBRARY_PATH=$root/.device/lib
export KAGENT_HOME=$root KAGENT_PYTHON=${KAGENT_PYTHON:-python3}
bin=$root/.device/kagent-actors
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; ncu --version | tail -1;
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; } > "$out/machine.txt" 2>&1
for spec in "matvec optimize_01_matvec" "rmsnorm optimize_02_rmsnorm"; do
  set -- $spec
  t0=$(date +%s.%N)
  "$bin" --strategy "benchmarks/h200/nvidia_$1.yaml" --kernel-dir "examples/$2" --run-dir "$out/runs_$1" \
      > "$out/$1_run.log" 2>&1
  echo "rc=$? wall_s=$(python3 -c "import sys; print(round($(date +%s.%N) - $t0, 1))")" >> "$out/$1_run.log"
done
python3 benchmarks/h200/profile_cost.py --out "$out" --reps 2 \
    --runs "$out/runs_matvec:$root/examples/optimize_01_matvec" "$out/runs_rmsnorm:$root/examples/optimize_02_rmsnorm" \
    > "$out/profile_cost.txt" 2>&1
# Keep what matters, drop the Triton caches.
find "$out" -name ".triton_cache*" -type d -prune -exec rm -rf {} + 2>/dev/null
exit 0
