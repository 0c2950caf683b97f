#!/usr/bin/env python3
"""How much device memory a kernel directory's test.py takes at its peak, with the starting kernel as
kernel.py (the judge's memory rules estimate "about four inputs and outputs" for it, harness/judge.py
choose_resident_sets): torch's peak allocated and reserved bytes, beside the problem's input and
output sizes.

    probe_test_memory.py --kernel-dir examples/optimize_02_rmsnorm
"""
import argparse
import os
import runpy
import shutil
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel-dir", required=True)
    a = ap.parse_args()
    kdir = os.path.abspath(a.kernel_dir)
    work = tempfile.mkdtemp()
    shutil.copy(os.path.join(kdir, "input.py"), os.path.join(work, "kernel.py"))
    os.chdir(work)
    sys.argv = [os.path.join(kdir, "test.py")]
    sys.path.insert(0, kdir)
    import torch
    code = 0
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as exc:
        code = exc.code
    gib = 2 ** 30
    peak_alloc, peak_res = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
    torch.cuda.empty_cache()
    import problem
    inputs = problem.get_inputs(device="cuda", dtype=torch.bfloat16)
    in_b = sum(t.numel() * t.element_size() for t in inputs if torch.is_tensor(t))
    model = problem.Model(*problem.get_init_inputs()).cuda()
    with torch.no_grad():
        out = model(*inputs)
    out_b = out.numel() * out.element_size()
    print(f"{os.path.basename(kdir)}: test.py exit {code}; peak allocated {peak_alloc / gib:.2f} GiB, "
          f"peak reserved {peak_res / gib:.2f} GiB; input {in_b / gib:.2f} GiB, "
          f"output {out_b / gib:.2f} GiB: the judge's estimate 4 x (input + output) = {4 * (in_b + out_b) / gib:.2f} GiB")


if __name__ == "__main__":
    main()
