#!/bin/bash
# Where a candidate's first call goes, in-process against the judge's worker: trusted_cost.py's
# before_novel pass (each kernel new to Triton's cache, load_and_verify_s per candidate) and its
# after_steady pass with a cProfile of every worker's load and verify (KAGENT_WORKER_PROFILE; the
# sandbox would keep the worker from writing it, so unsandboxed). Files under $OUT/pr.
set -u
out=${OUT:?}/pr; mkdir -p $out/prof
for pass in before_novel after_steady; do
  KAGENT_WORKER_PROFILE=$out/prof timeout 150 python3 benchmarks/trusted_cost.py --kernel-dir examples/optimize_01_matvec \
    --candidates benchmarks/h200/replay_matvec --peak-gbps 4800 --warmup 10 --repeat 50 --only-pass $pass \
    --json $out/$pass.json > $out/$pass.txt 2>&1
  echo "rc=$?" >> $out/$pass.txt
done
ls $out/prof | wc -l
