"""Correctness test: kernel_function (from kernel.py, else input.py) against problem.Model.

Runs on CUDA/ROCm when a GPU is visible; otherwise on the CPU through the Triton interpreter with
the small problem shape. Prints PASS or "FAIL: max difference = ..." and exits 0 or 1.
"""
import inspect
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.getcwd())
sys.path.insert(1, HERE)

ON_GPU = torch.cuda.is_available()
if not ON_GPU:
    # Must happen before triton is imported (by the kernel module below).
    os.environ.setdefault("TRITON_INTERPRET", "1")
    os.environ.setdefault("KAGENT_PROBLEM_SIZE", "small")

if os.path.exists(os.path.join(os.getcwd(), "kernel.py")):
    from kernel import kernel_function
else:
    from input import kernel_function
from problem import Model, get_inputs, get_init_inputs

DEVICE = "cuda" if ON_GPU else "cpu"
DTYPE = torch.bfloat16
VOCABULARY = ("weight", "w", "bias", "eps", "dim", "stride", "padding", "dilation", "kernel_size",
              "features", "normalized_shape", "num_groups", "groups")


def named_params(model, init_inputs):
    """Values the kernel may ask for by name: the Model's constructor arguments and attributes."""
    named = {}
    try:
        bound = inspect.signature(type(model).__init__).bind(model, *init_inputs)
        named.update({k: v for k, v in bound.arguments.items() if k != "self"})
    except TypeError:
        pass
    for name in VOCABULARY:
        if name not in named and hasattr(model, name):
            named[name] = getattr(model, name)
    if "weight" in named and "w" not in named:
        named["w"] = named["weight"]
    return named


def bind(fn, inputs, named):
    sig = inspect.signature(fn)
    args, kwargs, rest = [], {}, list(inputs)
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            if rest:
                args.append(rest.pop(0))
            elif p.name in named:
                kwargs[p.name] = named[p.name]
        elif p.kind == p.VAR_POSITIONAL:
            args.extend(rest)
            rest = []
        elif p.kind == p.KEYWORD_ONLY and p.name in named:
            kwargs[p.name] = named[p.name]
        elif p.kind == p.VAR_KEYWORD:
            kwargs.update({k: v for k, v in named.items() if k not in kwargs and k not in sig.parameters})
    return args, kwargs


def main():
    torch.manual_seed(0)
    init_inputs = get_init_inputs()
    model = Model(*init_inputs).to(DEVICE).eval()
    # Drawn on the device in the test's dtype where problem.py allows it: the full matvec input is
    # 8 GiB of float32 on the host otherwise, and drawing it took most of this test's 17 s on the H200.
    try:
        raw = get_inputs(device=DEVICE, dtype=DTYPE)
    except TypeError:
        raw = get_inputs()
    inputs = [t.to(DEVICE, DTYPE) if torch.is_tensor(t) and t.is_floating_point() else t for t in raw]
    with torch.no_grad():
        expected = model(*inputs)
        args, kwargs = bind(kernel_function, [t.clone() if torch.is_tensor(t) else t for t in inputs],
                            named_params(model, init_inputs))
        out = kernel_function(*args, **kwargs)
        if out is None:
            out = args[0]
    if ON_GPU:
        torch.cuda.synchronize()
    if out.shape != expected.shape and out.numel() == expected.numel():
        out = out.reshape(expected.shape)
    if out.shape != expected.shape:
        print(f"FAIL: shape mismatch: got {tuple(out.shape)}, expected {tuple(expected.shape)}")
        return 1
    del inputs, args, kwargs
    # Compared in float32 a slice at a time: the full output is 3.5 GiB in bf16, and float32 copies of
    # both plus their difference took 30 GiB more, which did not fit beside the harness's own
    # process on an 80 GB card.
    flat_out, flat_exp = out.reshape(-1), expected.reshape(-1)
    chunk = 1 << 26
    max_diff, ok = 0.0, True
    for start in range(0, flat_out.numel(), chunk):
        o = flat_out[start:start + chunk].float()
        e = flat_exp[start:start + chunk].float()
        if o.numel():
            max_diff = max(max_diff, (o - e).abs().max().item())
        ok = ok and bool(torch.isfinite(o).all()) and torch.allclose(o, e, rtol=1e-2, atol=1e-2)
    if not ok:
        print(f"FAIL: max difference = {max_diff}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
