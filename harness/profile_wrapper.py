#!/usr/bin/env python3
"""The program a profiler (rocprofv3, ncu) runs: one candidate kernel on the problem's inputs, or a
batch of them in one process.

    profile_wrapper.py --problem problem.py (--kernel kernel.py | --batch ID=PATH [--batch ID=PATH ...])
                       [--device cuda|cpu] [--dtype bfloat16|...|auto] [--size small] [--warmup 3] [--seed 0]
                       [--launchers SHARED]

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

Batch mode (--batch, the profile runner's profile_kernels): one interpreter, one CUDA context and one
set of inputs per dtype for all the kernels; before each kernel's warm-ups the marker kernel of
harness/batch_marker.py runs with a grid of (index + 1,), so the profiler's rows after it are that
kernel's; each measured call also runs inside the nested range "kagent_kernel:ID". Prints "kernel ID
output shape: ..." or "kernel ID failed: ..." per kernel and exits 0 once the batch ran through.

Standby mode (--standby DIR, the profile runner's ncu_standby): the process a profiler starts before
its kernels exist. It imports torch, Triton and the problem, creates its CUDA context and prepares
Triton (launchers.prepare_triton: the driver's utilities and a compile of a harness kernel; no kernel
launch, no input: the device may be timing another candidate meanwhile), writes DIR/standby.ready,
then waits for DIR/batch.json ({"kernels": [[ID, PATH], ...]}, written once by the runner) and runs
that batch as --batch does but without markers: the profiler was started with an NVTX filter
(kagent_measured), so only measured calls are profiled, and each kernel's rows are told apart by
its nested range kagent_kernel:ID. No batch within --idle-s seconds: "standby: no batch" and exit 0.
It serves one batch and exits: candidate code never shares a process with a later candidate's.

--launchers SHARED (NVIDIA under bwrap, where the runner binds it read-only): the judge's shared launcher
directory, looked up before Triton builds a launcher with the C compiler (harness/launchers.py), so
that a profiled kernel's first call does not build what the judge's workers built already.
"""
import argparse
import contextlib
import inspect
import os
import sys
import traceback

_TRACE = os.environ.get("KAGENT_PROFILE_TRACE") == "1"


def mark(what):
    """KAGENT_PROFILE_TRACE=1: the wall-clock time of each phase on stderr (a diagnostic of where a
    profiler process's fixed cost goes: benchmarks/h200/probe_ncu_fixed.py)."""
    if _TRACE:
        import time
        print(f"[profile_wrapper {time.time():.3f}] {what}", file=sys.stderr, flush=True)


MEASURED_RANGE = "kagent_measured"
KERNEL_RANGE = "kagent_kernel:"  # + the kernel's id, nested in MEASURED_RANGE (batch mode)


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


def load_kernel(core, kernel_path):
    with core.working_directory(os.path.dirname(kernel_path)):
        kernel = core.import_fresh(kernel_path, "kernel")
    fn = getattr(kernel, "kernel_function", None)
    if fn is None or not callable(fn):
        raise core.CandidateError(f"{kernel_path} defines no callable kernel_function")
    return fn


class Problem:
    """The problem module, its inputs on the device and (built on demand) its Model's parameters:
    made once per process, so that a batch of kernels shares them."""

    def __init__(self, torch, core, problem_path, device, dtype, seed):
        self.torch, self.core, self.device, self.dtype = torch, core, device, dtype
        torch.manual_seed(seed)
        with core.working_directory(os.path.dirname(problem_path)):
            self.module = core.import_fresh(problem_path, "problem")
        mark("problem imported")
        self.inputs = make_inputs(torch, self.module, device, dtype)
        core.synchronize(device)
        mark("inputs on the device")
        get_init = getattr(self.module, "get_init_inputs", None)  # optional (SPEC §14 B.105)
        self.init_inputs = list(get_init()) if get_init else []
        self._named = None

    def named(self):
        if self._named is None:
            self._named = {}
            if hasattr(self.module, "Model"):
                with self.torch.device(self.device):
                    model = self.module.Model(*self.init_inputs)
                if any(True for _ in model.parameters()):
                    model = model.to(device=self.device, dtype=self.dtype)
                self._named = self.core.named_params(model.eval(), self.init_inputs)
        return self._named

    def bind(self, fn):
        named = self.named() if needs_model(fn, len(self.inputs)) else {}
        return self.core.bind_arguments(fn, self.inputs, named)


def run_one(torch, core, problem, fn, warmup, ranges):
    """Warm-ups, synchronize, the measured call inside the NVTX ranges `ranges` (outermost first),
    synchronize. Returns the output (the first argument for an in-place kernel)."""
    call_args, call_kwargs = problem.bind(fn)
    device = problem.device
    nvtx = getattr(getattr(torch, "cuda", None), "nvtx", None) if device.startswith("cuda") else None
    with torch.no_grad():
        for i in range(warmup):
            fn(*call_args, **call_kwargs)
            if i == 0:
                core.synchronize(device)
                mark("first call (compile) done")
        core.synchronize(device)
        mark("warm-ups done")
        pushed = 0
        if nvtx is not None:
            with contextlib.suppress(Exception):  # a build without NVTX/roctx: no range, same call
                for name in ranges:
                    nvtx.range_push(name)
                    pushed += 1
        out = fn(*call_args, **call_kwargs)
        for _ in range(pushed):
            with contextlib.suppress(Exception):
                nvtx.range_pop()
        core.synchronize(device)
    mark("measured call done")
    if out is None:
        out = call_args[0] if call_args else None  # an in-place kernel
    return out


def parse_batch_item(text):
    kid, sep, path = text.partition("=")
    if not sep or not kid or not path or any(c in kid for c in " \t/:"):
        raise ValueError(f"--batch expects ID=PATH with an ID of no spaces, '/' or ':' (got {text!r})")
    return kid, path


def main(argv=None):
    ap = argparse.ArgumentParser(description="run kernels for a profiler: warm-ups, then one measured call each")
    ap.add_argument("--problem", required=True, help="problem.py (or its directory)")
    ap.add_argument("--kernel", help="the kernel file defining kernel_function")
    ap.add_argument("--batch", action="append", default=[], metavar="ID=PATH",
                    help="profile several kernels in this one process, in order; each measured call runs "
                         "inside the NVTX ranges kagent_measured and kagent_kernel:ID")
    ap.add_argument("--device", default="cuda", help="cuda (the pinned GPU; HIP on ROCm) or cpu (Triton interpreter)")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32", "auto"],
                    help="floating input dtype; auto: inferred from the kernel text (SPEC §4.1)")
    ap.add_argument("--size", default=None, help="problem size variant (KAGENT_PROBLEM_SIZE), e.g. small")
    ap.add_argument("--warmup", type=int, default=3, help="calls before the measured one (JIT, autotune)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--standby", metavar="DIR",
                    help="start up, then wait for DIR/batch.json and profile that batch (NVTX attribution)")
    ap.add_argument("--idle-s", type=float, default=900.0, help="standby: give up after this long without a batch")
    ap.add_argument("--launchers", metavar="SHARED", default=None,
                    help="the judge's shared launcher directory (read-only here): launchers are looked up "
                         "there first (harness/launchers.py)")
    args = ap.parse_args(argv)
    if args.warmup < 0:
        ap.error("--warmup must be >= 0")
    if sum(1 for x in (args.kernel, args.batch, args.standby) if x) != 1:
        ap.error("give either --kernel, one or more --batch ID=PATH, or --standby DIR")
    try:
        batch = [parse_batch_item(b) for b in args.batch]
    except ValueError as exc:
        ap.error(str(exc))
    if len({kid for kid, _ in batch}) != len(batch):
        ap.error("--batch ids must be unique")

    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton
        if args.size is None:
            args.size = "small"  # the full example shapes are GPU-sized
    if args.size:
        os.environ["KAGENT_PROBLEM_SIZE"] = args.size

    problem_path = os.path.abspath(args.problem)
    if os.path.isdir(problem_path):
        problem_path = os.path.join(problem_path, "problem.py")
    kernels = [(kid, os.path.abspath(p)) for kid, p in batch]
    if args.kernel:
        kernels = [(None, os.path.abspath(args.kernel))]
    if args.standby and not os.path.isdir(args.standby):
        print(f"profile_wrapper: standby directory not found: {args.standby}", file=sys.stderr)
        return 2
    for what, path in [("problem", problem_path)] + [("kernel", p) for _, p in kernels]:
        if not os.path.isfile(path):
            print(f"profile_wrapper: {what} file not found: {path}", file=sys.stderr)
            return 2

    # harness_core is stdlib-only at import (torch is loaded lazily); it gives the evaluator's loader
    # and argument binding, so the profiled call is the call that was verified and benchmarked.
    mark("main")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import harness_core as core
    import torch
    mark("torch imported")

    if args.standby:
        return run_standby(torch, core, args, problem_path)
    if args.launchers:
        import launchers
        launchers.prepare_triton(args.launchers)
    if not batch:
        return run_single(torch, core, args, problem_path, kernels[0][1])
    return run_batch(torch, core, args, problem_path, kernels)


def kernel_dtype(core, args, kernel_path):
    with open(kernel_path, encoding="utf-8") as f:
        source = f.read()
    return core.dtype_of(infer_dtype(source) if args.dtype == "auto" else args.dtype)


def run_single(torch, core, args, problem_path, kernel_path):
    try:
        dtype = kernel_dtype(core, args, kernel_path)
        problem = Problem(torch, core, problem_path, args.device, dtype, args.seed)
        fn = load_kernel(core, kernel_path)
        out = run_one(torch, core, problem, fn, args.warmup, [MEASURED_RANGE])
    except core.CandidateError as exc:
        print(f"profile_wrapper: {exc}", file=sys.stderr)
        return 1
    except Exception:  # noqa: BLE001 - the profiler reports our exit status and stderr
        traceback.print_exc()
        return 1
    print(f"output shape: {output_shape(out)}", flush=True)
    return 0


def read_standby_batch(path):
    """The runner's batch.json: {"kernels": [[ID, PATH], ...]} with unique ids of the --batch form."""
    import json
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    items = doc.get("kernels") if isinstance(doc, dict) else None
    if not isinstance(items, list) or not items:
        raise ValueError(f"{path}: expected {{\"kernels\": [[ID, PATH], ...]}} with at least one kernel")
    kernels = [parse_batch_item(f"{kid}={p}") for kid, p in items]
    if len({kid for kid, _ in kernels}) != len(kernels):
        raise ValueError(f"{path}: kernel ids must be unique")
    return [(kid, os.path.abspath(p)) for kid, p in kernels]


def run_standby(torch, core, args, problem_path):
    """Starts up while the device does other work, then runs the one batch the runner hands over."""
    import time
    t0 = time.time()
    directory = os.path.abspath(args.standby)
    # What a candidate's first call would otherwise pay: Triton and its driver (the launcher
    # utilities are built once per cache), the problem module (trusted: the user's), the context.
    import triton  # noqa: F401
    import triton.language  # noqa: F401
    with contextlib.suppress(Exception):
        triton.runtime.driver.active.get_current_device()
    with core.working_directory(os.path.dirname(problem_path)):
        core.import_fresh(problem_path, "problem_warm")
    if args.device.startswith("cuda"):
        torch.empty(1, device=args.device)  # the context, with no kernel launched
    # The launchers the judge's workers built (with --launchers), the driver's utilities and a
    # compile of a harness kernel (not launched: nothing for the profiler to see).
    import launchers
    import process_end  # before any candidate code: its end is ours (fast_exit_enabled, end_now)
    launchers.prepare_triton(args.launchers, compile_probe=True)
    mark("triton prepared")
    mark("standby ready")
    ready = os.path.join(directory, "standby.ready")
    with open(ready + ".tmp", "w", encoding="utf-8") as f:
        f.write(f"{os.getpid()} {time.time() - t0:.3f}\n")
    os.replace(ready + ".tmp", ready)
    print(f"standby: ready after {time.time() - t0:.2f} s", flush=True)
    batch_file = os.path.join(directory, "batch.json")
    deadline = time.monotonic() + args.idle_s
    while not os.path.exists(batch_file):
        if time.monotonic() > deadline:
            print(f"standby: no batch within {args.idle_s:g} s", flush=True)
            return 0
        time.sleep(0.01)
    mark("batch received")
    try:
        kernels = read_standby_batch(batch_file)
    except (OSError, ValueError) as exc:
        print(f"profile_wrapper: {exc}", file=sys.stderr)
        return 2
    print(f"standby: batch of {len(kernels)} received after {time.time() - t0:.2f} s", flush=True)
    rc = run_batch(torch, core, args, problem_path, kernels, markers=False)
    if process_end.fast_exit_enabled():
        # The batch is over and every profiled launch synchronized: end here, without the interpreter's
        # teardown (0.46 s under ncu on an H100, which held the device). Candidate code's atexit
        # handlers do not run. If candidate code replaced os._exit, the process ends the slow way; the
        # runner gives the device back only once it is gone either way.
        process_end.end_now(rc)
    return rc


def run_batch(torch, core, args, problem_path, kernels, markers=True):
    """Each kernel in turn on one set of inputs per dtype, each preceded (unless `markers` is False:
    standby mode, told apart by NVTX range) by the batch marker with a grid of (its index + 1,)
    (harness/batch_marker.py). A kernel that fails prints
    "kernel ID failed: ..." and the next one runs; the exit status is 0 once the batch ran through.
    After a device fault the context is lost, so every later kernel fails too: the runner profiles
    those again on their own."""
    problems = {}
    failed = 0
    marker = None
    if markers:
        import batch_marker  # noqa: E402 - Triton only in batch mode
        marker = batch_marker.Marker(torch, args.device, len(kernels))
    for index, (kid, path) in enumerate(kernels):
        try:
            # Before the kernel's warm-ups: every row of this kernel comes after its marker.
            if marker is not None:
                marker.launch(index)
                core.synchronize(args.device)
            dtype = kernel_dtype(core, args, path)
            if dtype not in problems:
                problems[dtype] = Problem(torch, core, problem_path, args.device, dtype, args.seed)
            fn = load_kernel(core, path)
            out = run_one(torch, core, problems[dtype], fn, args.warmup, [MEASURED_RANGE, f"{KERNEL_RANGE}{kid}"])
        except Exception as exc:  # noqa: BLE001 - reported per kernel, the batch goes on
            failed += 1
            if not isinstance(exc, core.CandidateError):
                traceback.print_exc()
            reason = str(exc) if isinstance(exc, core.CandidateError) else f"{type(exc).__name__}: {exc}"
            print(f"kernel {kid} failed: {' '.join(reason.split())}", flush=True)
            continue
        print(f"kernel {kid} output shape: {output_shape(out)}", flush=True)
    # 0 once the batch ran through, failures or not: a profiler may drop its output when the program
    # fails, and the runner tells the kernels apart by their markers (a failed one has no rows).
    print(f"batch: {len(kernels) - failed} of {len(kernels)} kernel(s) ran", flush=True)
    mark("batch done")  # what follows is the interpreter's exit and ncu's report, not the device's work
    return 0


if __name__ == "__main__":
    sys.exit(main())
