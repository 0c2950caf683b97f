#!/bin/bash
# Can a memory cap hold a CUDA process? RLIMIT_AS cannot (CUDA reserves far more address space than it
# uses); RLIMIT_DATA counts only private writable mappings. Prints VmData/VmSize of a CUDA process,
# then tries a 20 GiB host allocation under `prlimit --data`.
cap_mb=${1:-16384}
d=$(mktemp -d)
cat > $d/vm.py <<'PY'
import torch, re
def vm():
    s = open("/proc/self/status").read()
    return {k: re.search(k + r":\s+(\d+) kB", s).group(1) for k in ("VmSize", "VmData", "VmRSS")}
print("before cuda", vm())
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print("after cuda + 1 GiB device buffer", vm())
import triton, triton.language as tl
@triton.jit
def k(p, n, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(p + o, tl.load(p + o, mask=o < n), mask=o < n)
y = torch.zeros(1024, device="cuda")
k[(1,)](y, 1024, B=1024)
torch.cuda.synchronize()
print("after a Triton launch", vm())
PY
python3 $d/vm.py
echo "--- under prlimit --data=${cap_mb}MiB"
cat > $d/cap.py <<'PY'
import torch, time
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
import triton, triton.language as tl
@triton.jit
def k(p, n, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(p + o, tl.load(p + o, mask=o < n), mask=o < n)
y = torch.zeros(1024, device="cuda")
k[(1,)](y, 1024, B=1024)
torch.cuda.synchronize()
print("CUDA and Triton work under the cap")
try:
    big = torch.ones(20 << 30, dtype=torch.uint8)
    print("20 GiB host allocation SUCCEEDED (cap not effective)", big.sum().item())
except Exception as exc:
    print("20 GiB host allocation refused:", type(exc).__name__, str(exc)[:160])
try:
    pinned = torch.empty(4 << 30, dtype=torch.uint8, pin_memory=True)
    print("4 GiB pinned host allocation succeeded under the cap")
except Exception as exc:
    print("4 GiB pinned host allocation refused:", type(exc).__name__, str(exc)[:160])
PY
prlimit --data=$((cap_mb << 20)) python3 $d/cap.py
