#!/usr/bin/env python3
"""The program a profiler (rocprofv3, ncu) runs: one candidate kernel on the problem's inputs.

    profile_wrapper.py --problem problem.py --kernel kernel.py [--device cuda|cpu] [--dtype bfloat16|...|auto]
                       [--size small] [--warmup 3] [--seed 0]

It imports only torch, the problem and the kernel (plus the stdlib-only helpers of harness_core, which
bind the kernel's arguments exactly as the evaluator does). The inputs are created where they are used:
a `get_inputs(device=, dtype=)` that accepts them gets them, and every other factory call runs under
`torch.device(<device>)`, so a 4 GiB input is never built on the host and copied. `get_init_inputs` is
optional (SPEC §14 B.105); the problem's Model is built (on the device) only when the kernel's signature
asks for something beyond the inputs (weight, eps, ...). Nothing is verified and no reference is run:
every launch in this process is something the profiler has to sort through.

Then: --warmup calls (default 3: they also cover Triton's JIT and autotune), synchronize, one measured
call (inside an NVTX range "kagent_measured" where torch.cuda.nvtx exists), synchronize, and the line
"output shape: (M, N)". Exit status 0; 1 when the problem, the kernel or a call fails (traceback on
stderr); 2 on bad usage. With --device cpu, TRITON_INTERPRET=1 is set before triton is imported and the
problem size defaults to "small", as in run_once.py, so tests can run it without a GPU.
"""
import argparse
import contextlib
import inspect
import os
import sys
import traceback

MEASURED_RANGE = "kagent_measured"


def infer_dtype(source):
    """SPEC §4.1's rule on the kernel text, lower-cased: bfloat16, else float16/half, else float32."""
    s = source.lower()
    if "bfloat16" in s:
        return "bfloat16"
    if "float16" in s or "half" in s:
        return "float16"
    if "float32" in s:
        return "float32"
    return "bfloat16"


def accepts(fn, name):
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def needs_model(fn, n_inputs):
    """True when binding `fn` may take something besides the positional inputs (SPEC §5.1 step 4)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    positional = 0
    for p in params:
        if p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD):
            return True
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional += 1
    return positional > n_inputs


def make_inputs(torch, module, device, dtype):
    """The problem's inputs, generated on `device`; floating tensors in `dtype`."""
    kw = {}
    if accepts(module.get_inputs, "device"):
        kw["device"] = device
    if accepts(module.get_inputs, "dtype"):
        kw["dtype"] = dtype
    with torch.device(device):
        raw = list(module.get_inputs(**kw))
    out = []
    for t in raw:
        if torch.is_tensor(t):
            t = t.to(device=device, dtype=dtype) if t.is_floating_point() else t.to(device)
        out.append(t)
    return out


def output_shape(out):
    if isinstance(out, (tuple, list)):
        return "[" + ", ".join(output_shape(o) for o in out) + "]"
    shape = getattr(out, "shape", None)
    return str(tuple(shape)) if shape is not None else type(out).__name__


def main(argv=None):
    ap = argparse.ArgumentParser(description="run one kernel for a profiler: warm-ups, then one measured call")
    ap.add_argument("--problem", required=True, help="problem.py (or its directory)")
    ap.add_argument("--kernel", required=True, help="the kernel file defining kernel_function")
    ap.add_argument("--device", default="cuda", help="cuda (the pinned GPU; HIP on ROCm) or cpu (Triton interpreter)")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32", "auto"],
                    help="floating input dtype; auto: inferred from the kernel text (SPEC §4.1)")
    ap.add_argument("--size", default=None, help="problem size variant (KAGENT_PROBLEM_SIZE), e.g. small")
    ap.add_argument("--warmup", type=int, default=3, help="calls before the measured one (JIT, autotune)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.warmup < 0:
        ap.error("--warmup must be >= 0")

    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton
        if args.size is None:
            args.size = "small"  # the full example shapes are GPU-sized
    if args.size:
        os.environ["KAGENT_PROBLEM_SIZE"] = args.size

    problem_path = os.path.abspath(args.problem)
    if os.path.isdir(problem_path):
        problem_path = os.path.join(problem_path, "problem.py")
    kernel_path = os.path.abspath(args.kernel)
    for what, path in (("problem", problem_path), ("kernel", kernel_path)):
        if not os.path.isfile(path):
            print(f"profile_wrapper: {what} file not found: {path}", file=sys.stderr)
            return 2

    # harness_core is stdlib-only at import (torch is loaded lazily); it gives the evaluator's loader
    # and argument binding, so the profiled call is the call that was verified and benchmarked.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import harness_core as core
    import torch

    try:
        with open(kernel_path, encoding="utf-8") as f:
            source = f.read()
        dtype_name = infer_dtype(source) if args.dtype == "auto" else args.dtype
        dtype = core.dtype_of(dtype_name)
        device = args.device

        torch.manual_seed(args.seed)
        with core.working_directory(os.path.dirname(problem_path)):
            problem = core.import_fresh(problem_path, "problem")
        inputs = make_inputs(torch, problem, device, dtype)
        get_init = getattr(problem, "get_init_inputs", None)  # optional (SPEC §14 B.105)
        init_inputs = list(get_init()) if get_init else []

        with core.working_directory(os.path.dirname(kernel_path)):
            kernel = core.import_fresh(kernel_path, "kernel")
        fn = getattr(kernel, "kernel_function", None)
        if fn is None or not callable(fn):
            print(f"profile_wrapper: {kernel_path} defines no callable kernel_function", file=sys.stderr)
            return 1

        named = {}
        if needs_model(fn, len(inputs)) and hasattr(problem, "Model"):
            with torch.device(device):
                model = problem.Model(*init_inputs)
            if any(True for _ in model.parameters()):
                model = model.to(device=device, dtype=dtype)
            named = core.named_params(model.eval(), init_inputs)
        call_args, call_kwargs = core.bind_arguments(fn, inputs, named)

        nvtx = getattr(getattr(torch, "cuda", None), "nvtx", None) if device.startswith("cuda") else None
        with torch.no_grad():
            for _ in range(args.warmup):
                fn(*call_args, **call_kwargs)
            core.synchronize(device)
            pushed = False
            if nvtx is not None:
                with contextlib.suppress(Exception):  # a build without NVTX/roctx: no range, same call
                    nvtx.range_push(MEASURED_RANGE)
                    pushed = True
            out = fn(*call_args, **call_kwargs)
            if pushed:
                with contextlib.suppress(Exception):
                    nvtx.range_pop()
            core.synchronize(device)
        if out is None:
            out = call_args[0] if call_args else None  # an in-place kernel
    except core.CandidateError as exc:
        print(f"profile_wrapper: {exc}", file=sys.stderr)
        return 1
    except Exception:  # noqa: BLE001 - the profiler reports our exit status and stderr
        traceback.print_exc()
        return 1
    print(f"output shape: {output_shape(out)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
