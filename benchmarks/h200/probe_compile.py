#!/usr/bin/env python3
"""Where a candidate's first call in a fresh worker spends its time: Triton's kernel compile, its
launcher build (a C module compiled per kernel signature), or neither (a warm cache).

One fresh interpreter per (candidate, cache state), each: import torch + triton, CUDA context, a
harness-owned Triton kernel once (as the worker's warm-up does), then the candidate's first call and
its second call. Cache states: cold (an empty TRITON_CACHE_DIR), launcher (only the launcher
modules of an earlier cold run kept), kernel (only the compiled kernels kept), warm (everything).

Usage: probe_compile.py --kernel-dir examples/optimize_01_matvec --candidates benchmarks/h200/replay_matvec
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
sys.path.insert(0, os.path.join(sys.argv[1], "harness"))
import harness_core as core
import worker
torch = core.torch_module()
import triton
import torch.utils._python_dispatch
mode = sys.argv[4]
t_import = time.perf_counter() - t0


def body():
    t0 = time.perf_counter()
    problem = core.Problem(sys.argv[2], "cuda", "bfloat16", None, 0)
    buf = torch.zeros(1 << 20, dtype=torch.int32, device="cuda")
    worker.warm_triton(buf)
    torch.cuda.synchronize()
    t_warm = time.perf_counter() - t0
    inputs = problem.fresh_inputs()
    t0 = time.perf_counter()
    cand = core.load_candidate(sys.argv[3], open(sys.argv[3]).read())
    args, kwargs = core.bind_arguments(cand.fn, inputs, problem.named)
    t_load = time.perf_counter() - t0
    ctx = contextlib.nullcontext()
    if mode in ("recorded", "poison", "recorder", "hook", "profiled", "compiles"):
        rec = worker.OpRecorder()
        if mode in ("recorded", "hook", "profiled", "compiles"):
            worker.Launches(False)
        if mode in ("compiles",):
            worker.Compiles(True)
        use_poison = mode in ("recorded", "poison", "profiled", "compiles")
        use_rec = mode in ("recorded", "recorder", "profiled", "compiles")
        prof = None
        if mode == "profiled":
            import cProfile
            prof = cProfile.Profile()
            prof.enable()
        t0 = time.perf_counter()
        with (core.poisoned_allocations() if use_poison else contextlib.nullcontext()), \
                (rec.mode if use_rec else contextlib.nullcontext()):
            cand.fn(*args, **kwargs)
        if prof is not None:
            prof.disable()
            import pstats, io
            sio = io.StringIO()
            pstats.Stats(prof, stream=sio).sort_stats("cumulative").print_stats(30)
            print(sio.getvalue()[-6000:], file=sys.stderr)
            sio = io.StringIO()
            pstats.Stats(prof, stream=sio).sort_stats("tottime").print_stats(15)
            print(sio.getvalue()[-3000:], file=sys.stderr)
    else:
        t0 = time.perf_counter()
        cand.fn(*args, **kwargs)
    torch.cuda.synchronize()
    t_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    cand.fn(*args, **kwargs)
    torch.cuda.synchronize()
    t_second = time.perf_counter() - t0
    print(json.dumps({"import_s": t_import, "cuda_and_warm_s": t_warm, "load_s": t_load,
                      "first_call_s": t_first, "second_call_s": t_second}), flush=True)


import contextlib
if mode == "forked":
    pid = os.fork()
    if pid == 0:
        try:
            body()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
else:
    body()
"""


def extract(md):
    m = re.search(r"```python\n(.*?)```", md, re.S)
    return m.group(1) if m else md


def write_candidate(name, kernel_dir, candidates, tmp):
    """(path, code) of candidate `name` written into `tmp`: input.py from the kernel directory, an
    .md reply of the replay set by its code block."""
    src = os.path.join(kernel_dir, name) if name == "input.py" else os.path.join(candidates, name)
    with open(src) as f:
        text = f.read()
    code = text if name.endswith(".py") else extract(text)
    path = os.path.join(tmp, name.replace(".md", ".py").replace("input.py", "start.py"))
    with open(path, "w") as f:
        f.write(code)
    return path, code


def run(child, kernel_dir, path, cache, mode="plain"):
    env = dict(os.environ, TRITON_CACHE_DIR=cache)
    p = subprocess.run([sys.executable, child, str(ROOT), os.path.join(kernel_dir, "problem.py"), path, mode],
                       env=env, capture_output=True, text=True, timeout=240)
    if mode == "profiled":
        print(p.stderr[-9000:], file=sys.stderr)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {"error": p.stderr[-400:]}


def keep_only(src, dst, launcher):
    shutil.copytree(src, dst)
    for d in os.listdir(dst):
        names = os.listdir(os.path.join(dst, d))
        is_launcher = any(n.endswith(".so") for n in names)
        if is_launcher != launcher:
            shutil.rmtree(os.path.join(dst, d))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel-dir", required=True)
    ap.add_argument("--candidates", required=True)
    ap.add_argument("--only", default="input.py,optimize_001.md,optimize_004.md")
    ap.add_argument("--modes", default="forked,recorded")
    ap.add_argument("--quick", action="store_true", help="only the cold run and --modes")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="probe-compile-")
    child = os.path.join(tmp, "child.py")
    with open(child, "w") as f:
        f.write(CHILD)
    rows = {}
    for name in a.only.split(","):
        path, _ = write_candidate(name, a.kernel_dir, a.candidates, tmp)
        cold = os.path.join(tmp, name + ".cold")
        r = {"cold": run(child, a.kernel_dir, path, cold)}
        r["cache_entries"] = sorted(sorted(os.listdir(os.path.join(cold, d))) for d in os.listdir(cold))
        if not a.quick:
            keep_only(cold, cold + ".L", True)
            keep_only(cold, cold + ".K", False)
            r["launcher_only"] = run(child, a.kernel_dir, path, cold + ".L")
            r["kernel_only"] = run(child, a.kernel_dir, path, cold + ".K")
            r["warm"] = run(child, a.kernel_dir, path, cold)
        for mode in a.modes.split(","):
            shutil.rmtree(cold + "." + mode, ignore_errors=True)
            r[mode + "_cold"] = run(child, a.kernel_dir, path, cold + "." + mode, mode)
        rows[name] = r
        print(name, json.dumps(r), flush=True)
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
