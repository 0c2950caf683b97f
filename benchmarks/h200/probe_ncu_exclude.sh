#!/bin/bash
# Does ncu take a kernel-name filter that leaves PyTorch's own kernels out of the measured range
# (--kernel-name regex:<not_pytorch_kernel_regex of profile_common.hpp>, demangled names, beside the NVTX filter)? Runs the
# wrapper on the replay set's split-K kernel (three launches in its measured call: PyTorch's fill,
# the Triton kernel, PyTorch's conversion) with the run's metric list, with and without it, twice
# each; prints each command's wall time and the kernels in its CSV. Files in $OUT/excl/.
set -u
out=${OUT:?}/excl; mkdir -p $out
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
python3 - benchmarks/h200/replay_matvec/optimize_001.md $out/k.py <<'PY'
import re, sys
md = open(sys.argv[1]).read()
open(sys.argv[2], "w").write(re.search(r"```python\n(.*?)```", md, re.S).group(1))
PY
metrics=$(grep -oE '"[a-z0-9_]+__[a-z0-9_.]+"' platform/nvidia/ncu_plan.cpp | tr -d '"' | paste -sd,)
for rep in 1 2; do
  for mode in plain excl; do
    extra=(); [ $mode = excl ] && extra=(--kernel-name "regex:$(grep -oE "not_pytorch_kernel_regex = \"[^\"]+" platform/profile_core/profile_common.hpp | cut -d\" -f2)")
    t0=$(date +%s.%N)
    $ncu --csv --page raw --print-units base --kernel-name-base demangled --target-processes all \
      --replay-mode kernel --profile-from-start on --log-file $out/${mode}_$rep.csv --metrics $metrics \
      --nvtx --nvtx-include kagent_measured/ "${extra[@]}" \
      python3 harness/profile_wrapper.py --problem examples/optimize_01_matvec/problem.py --kernel $out/k.py \
      > $out/${mode}_$rep.txt 2>&1
    rc=$?
    echo "$mode rep $rep rc $rc wall $(python3 -c "print(round($(date +%s.%N) - $t0, 2))") kernels: $(python3 - $out/${mode}_$rep.csv <<'PY'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if not l.startswith("=="))]
if not rows:
    print("no CSV rows"); sys.exit()
i = rows[0].index("Kernel Name")
print([r[i][:40] for r in rows[2:]])
PY
)"
  done
done
