#!/usr/bin/env python3
"""The "before" of benchmarks/RESULTS.md's profile-cost comparison: a profiled program built the way the
original design builds it (SPEC §5.1) — the problem's inputs generated on the host by get_inputs() with
its defaults, then moved to the device and cast, get_init_inputs() required, then 3 warm-ups,
synchronize and 1 measured call. Only used to measure what that costs under ncu next to
harness/profile_wrapper.py, which creates the inputs on the device.

    naive_profile_wrapper.py --problem problem.py --kernel kernel.py
"""
import argparse
import importlib.util
import sys

import torch


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--problem", required=True)
    ap.add_argument("--kernel", required=True)
    a = ap.parse_args()
    problem = load(a.problem, "problem")
    kernel = load(a.kernel, "kernel")
    inputs = problem.get_inputs()                 # on the host, default dtype
    init = problem.get_init_inputs()              # required by the original wrapper
    dtype = torch.bfloat16
    moved = []
    for t in list(inputs) + list(init):
        if isinstance(t, torch.Tensor):
            t = t.cuda()
            if t.is_floating_point():
                t = t.to(dtype)
        moved.append(t)
    args = moved[: len(inputs)]
    for _ in range(3):
        kernel.kernel_function(*args)
    torch.cuda.synchronize()
    out = kernel.kernel_function(*args)
    torch.cuda.synchronize()
    print("output shape:", tuple(out.shape))


if __name__ == "__main__":
    main()
