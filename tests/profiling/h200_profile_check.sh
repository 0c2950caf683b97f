#!/bin/bash
# Checks the profile runner's NVIDIA command on a real GPU (the lent H200): the launcher the runner
# writes, harness/profile_wrapper.py on the example problems at full size, and ncu with the exact
# options plan_ncu builds (kernel-name filter, raw CSV page). Writes the CSVs and logs to OUTDIR; parse
# them with `kagent-actors inspect-profile nvidia --ncu-csv OUTDIR/<name>_ncu.csv --kernel <kernel>`.
# Usage (repository root): tests/profiling/h200_profile_check.sh OUTDIR [PYTHON]
set -u
out=${1:?outdir}
py=${2:-python3}
root=$(pwd)
mkdir -p "$out"
metrics=launch__occupancy_limit_blocks,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__registers_per_thread,launch__shared_mem_per_block_allocated,sm__cycles_active.avg,sm__warps_active.avg.pct_of_peak_sustained_active,sm__inst_executed.sum,sm__inst_executed_pipe_fp32.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes.sum.per_second,gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed,l1tex__t_sector_hit_rate.pct,l1tex__throughput.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct,lts__throughput.avg.pct_of_peak_sustained_active,smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct,smsp__sass_average_branch_targets_threads_uniform.pct,smsp__warp_issue_stalled_memory_dependency_per_warp_active.pct,smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_branch_resolving_per_warp_active.pct,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum
nvidia-smi --query-gpu=name --format=csv,noheader > "$out/gpu.txt" 2>&1
ncu --version > "$out/ncu_version.txt" 2>&1

# name example kernel
for spec in "matvec optimize_01_matvec matvec_kernel" "rmsnorm optimize_02_rmsnorm rmsnorm_kernel"; do
  set -- $spec
  name=$1 ex=$2 kernel=$3
  dir=$(mktemp -d)
  mkdir -p "$dir/tmp"
  cp "examples/$ex/input.py" "$dir/${name}_kernel.py"
  # The launcher, as profile_runner.cpp writes it.
  cat > "$dir/${name}_wrapper.py" <<PY
import runpy
import sys

sys.argv = ["$root/harness/profile_wrapper.py", "--problem", "$root/examples/$ex/problem.py", "--kernel", "$dir/${name}_kernel.py", "--device", "cuda", "--dtype", "bfloat16"]
runpy.run_path(sys.argv[0], run_name="__main__")
PY
  ( cd "$dir" && time env TMPDIR="$dir/tmp" TRITON_CACHE_DIR="$dir/.triton_cache" "$py" "${name}_wrapper.py" ) \
      > "$out/${name}_wrapper.log" 2>&1
  echo "rc=$?" >> "$out/${name}_wrapper.log"
  ( cd "$dir" && time env TMPDIR="$dir/tmp" TRITON_CACHE_DIR="$dir/.triton_cache" ncu --csv --page raw \
      --print-units base --kernel-name-base demangled --target-processes all --replay-mode kernel \
      --profile-from-start on --log-file "$out/${name}_ncu.csv" --metrics "$metrics" --kernel-name "$kernel" \
      "$py" "$dir/${name}_wrapper.py" ) > "$out/${name}_ncu.log" 2>&1
  echo "rc=$?" >> "$out/${name}_ncu.log"
done
