#!/bin/bash
# Does launchers.prepare_triton (a waiting standby's preparation) create a CUDA context? A process
# prepares, then waits; nvidia-smi's compute apps are read while it waits. Prints what it did
# (launchers.PREPARED), how long it took, and whether its pid holds device memory.
set -u
python3 - <<'PY' &
import sys, time
sys.path.insert(0, "harness")
import torch, triton  # noqa: F401
import launchers
t0 = time.perf_counter()
launchers.prepare_triton(None, compile_probe=True)
print("prepared", launchers.PREPARED, f"{time.perf_counter() - t0:.2f} s", flush=True)
time.sleep(6)
PY
pid=$!
sleep 5
echo "compute apps while it waits (pid $pid):"; nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
if nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -qw "$pid"; then echo "CONTEXT: yes"; else echo "CONTEXT: none"; fi
wait $pid
