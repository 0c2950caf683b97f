#!/usr/bin/env python3
"""Single-use candidate process (the untrusted side of the trusted evaluation, docs/harness.md).

The judge (harness/judge.py, inside the evaluator server) starts one of these per candidate, inside
the sandbox, before the candidate exists: it imports torch and triton, then waits. `prepare` loads the
problem's inputs on the device (from seeds the judge chose), maps the judge's receive slots and runs a
calibration loop; only then is the candidate imported (`load`), called on the verification sets
(`verify`) and timed (`time`). Its outputs are copied into the judge's slots and compared there, by
code this process never had a chance to patch. Afterwards the judge kills this process: nothing a
candidate does here outlives its evaluation.

Everything reported from here is evidence, never proof: a candidate can rewrite any of it. The judge
decides from what it can check itself (outputs against its references, its own wall clock, the
physics floor) and uses this process's reports only to reject, never to accept.

Protocol: one JSON object per line over --fd (a socketpair end). Requests carry "op"; every reply
carries "ev". fds 1 and 2 are the candidate's capture files in the scratch directory.
"""
import argparse
import base64
import bisect
import contextlib
import json
import os
import sys
import threading
import time
import types

# Timers are bound before any candidate code exists; a candidate that later replaces
# time.perf_counter or torch.cuda.Event.elapsed_time does not change what is read here (and is seen).
_perf_counter = time.perf_counter
_monotonic = time.monotonic
# What runs code in this thread between the timed calls without being called by the loop, bound here,
# before any candidate code exists (hooks_snapshot, hooks_changed).
import gc as _gc  # noqa: E402
import signal as _signal  # noqa: E402
_urandom = os.urandom
_getprofile = sys.getprofile
_gettrace = sys.gettrace
_getsignal = _signal.getsignal
_signals = sorted(_signal.valid_signals()) if hasattr(_signal, "valid_signals") else []
_gc_callbacks = _gc.callbacks  # the list the collector calls (rebinding gc.callbacks does not replace it)
_monitoring_tool = getattr(getattr(sys, "monitoring", None), "get_tool", None)
_torch_hooks = {}  # name -> what PyTorch says of it now, bound by bind_torch_hooks before any candidate


def _refuse_audit_hooks():
    """No audit hook may join this process after this (sys.addaudithook, or PySys_AddAuditHook through
    ctypes: both ask the hooks already there, and a RuntimeError from one refuses the new hook). An
    audit hook cannot be listed or removed, and CPython calls it on events the timed loop raises between
    the calls (builtins.id, object.__getattr__): tests/cheats/matvec/audit_in_the_loop.py computed its
    answers there, verified at 1.75 ms against the honest 31.5 ms on the cpu platform. Installed when
    this module is imported, in the fork server before any candidate code. Returns how many were
    refused (hooks_snapshot).

    Once forbid_forks() has run (before the candidate is imported) it also refuses every fork: os.fork
    and os.forkpty, and the C library's fork and clone looked up through ctypes. A forked child is a
    copy of the candidate's process that no recorder watches and no census at the end of a call sees
    once it has exited: tests/cheats/matvec/fork_in_the_call.py ran PyTorch's product in a child forked
    inside each call and was verified (24.1 ms against the honest 28.9 ms on the cpu platform, the fork
    costing most of it). A program started with exec (subprocess: Triton's own compiler and launcher
    builds) holds none of the process's state and is not refused."""
    refused = []

    def guard(event, args):
        if event == "sys.addaudithook":
            refused.append(1)
            raise RuntimeError("no audit hook may be added in a worker")
        if _forks_forbidden[0] and (event in ("os.fork", "os.forkpty")
                                    or event == "ctypes.dlsym" and len(args) > 1 and args[1] in FORKING_SYMBOLS):
            forks_refused.append(event if event != "ctypes.dlsym" else f"ctypes {args[1]}")
            raise RuntimeError("no process may be forked in a candidate's process")

    sys.addaudithook(guard)
    return refused.__len__


FORKING_SYMBOLS = frozenset({"fork", "vfork", "_Fork", "__fork", "clone", "clone3", "__clone", "__clone2", "syscall"})
_forks_forbidden = [False]
forks_refused = []  # what the candidate tried (os.fork, ctypes fork, ...)


def forbid_forks():
    _forks_forbidden[0] = True


def fork_evidence():
    """The integrity problem of a candidate that tried to fork, None if it did not."""
    if not forks_refused:
        return None
    return (f"the candidate tried to fork its process ({', '.join(sorted(set(forks_refused)))}: refused; a forked "
            "child runs PyTorch where no recorder watches)")


_audit_hooks_refused = _refuse_audit_hooks()
HARNESS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HARNESS)
import harness_core as core  # noqa: E402

# The ops a kernel wrapper may dispatch (harness_core.ALLOWED_ATEN) are decided in the judge: the
# worker reports every op its recorder saw (OpRecorder.seen). A candidate that widened the worker's
# own list (a module global, found through its caller's frames) had PyTorch's product pass as allowed
# (tests/cheats/matvec/allowlist_rebound.py: verified at 1.56 ms against the honest 30.1 ms on the cpu
# platform); the judge's list is in another process.


class OpRecorder:
    """Records the aten ops a candidate's call runs.

    The default is PyTorch's own profiler (CPU activity only): it sees every op the dispatcher runs,
    composite ones and what they decompose into. A TorchDispatchMode would see the same ops, but on
    a GPU the first Triton launch of every kernel under such a mode makes torch analyse the kernel
    (measured on the H200: 1.5-3.5 s per candidate). `prepare` checks the profiler with an op it
    must see (aten::mm); if it does not see it, the dispatch mode is used instead."""

    def __init__(self, kind="profiler"):
        from torch.utils._python_dispatch import TorchDispatchMode

        recorder = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                recorder.ops.add(str(func.name()) if hasattr(func, "name") else str(func))
                return func(*args, **(kwargs or {}))

        self.ops = set()
        self.kind = kind
        self._mode = Mode()
        self._session = None  # the profiler of a loop_session in progress
        self._marks = 0       # the candidate's calls it marked
        self.marks_found = None  # of those, the pairs of marks the last loop_session's recording held
        self.mark_problem = None  # why its marks did not pair up (a mark the candidate entered itself)
        import torch.autograd.profiler as autograd_profiler
        # The marks' context manager, bound before any candidate code: PyTorch's C++ one where it has
        # it (about 1 us a mark against 10 us for record_function, whose exit goes through torch.ops
        # and pytree in Python; the profiler records both alike, name and number).
        self._record_function = getattr(getattr(core.torch_module()._C, "_profiler", None), "_RecordFunctionFast",
                                        None) or autograd_profiler.record_function

    @staticmethod
    def _profiler():
        """PyTorch's profiler, recording the ops of every thread of the process: by default it records
        only the thread that switched it on, and a kernel that ran PyTorch's product in a thread it
        started and joined inside its call (tests/cheats/matvec/torch_in_a_thread.py) left no op and no
        thread behind."""
        import torch.autograd.profiler as autograd_profiler
        try:
            from torch._C._profiler import _ExperimentalConfig
            return autograd_profiler.profile(use_device=None,
                                             experimental_config=_ExperimentalConfig(profile_all_threads=True))
        except (ImportError, TypeError):
            return autograd_profiler.profile(use_device=None)

    @contextlib.contextmanager
    def recording(self):
        if self.kind != "profiler":
            with self._mode:
                yield
            return
        prof = self._profiler()
        prof.__enter__()
        try:
            yield
        finally:
            try:
                prof.__exit__(None, None, None)
                events = prof.function_events
            except Exception as exc:  # noqa: BLE001 - the candidate switched the profiler off
                raise core.CandidateError(f"the op recorder was switched off during the candidate's call ({exc})")
            for e in events:
                if e.name.startswith("aten::"):
                    self.ops.add(e.name)

    CALL_MARK = "kagent::candidate_call"
    END_MARK = "kagent::candidate_call_end"

    @contextlib.contextmanager
    def loop_session(self):
        """One recording around a whole timed loop (warm-up and timed calls), in which call_scope()
        marks each of the candidate's calls; at its end the ops that ran inside a mark join self.ops.
        The loop's own work between the calls (stamps, flush) is recorded too, outside the marks.
        Switching PyTorch's profiler on and off around every call cost 4.5 ms a call on an H100's host
        (the timed loop of matvec went from 0.15 to 0.42 s a candidate, 2026-12-07); once around the
        loop, with the raw events read instead of PyTorch's event tree, it costs a few ms in all. The
        dispatch-mode recorder (where the profiler fails its self-test) records each call instead."""
        self.marks_found, self.mark_problem = None, None
        if self.kind != "profiler":
            self._session = None
            yield
            return
        prof = self._profiler()
        prof.__enter__()
        self._session, self._marks = prof, 0
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):
                prof.__exit__(None, None, None)
            raise
        finally:
            self._session = None
        try:
            prof.__exit__(None, None, None)
            marked = self._marked_ops(prof)
        except RuntimeError as exc:  # the marks do not pair up: the judge rejects the candidate (integrity)
            self.mark_problem, marked = str(exc), set()
        except Exception as exc:  # noqa: BLE001 - the candidate switched the profiler off
            raise core.CandidateError(f"the op recorder was switched off during the candidate's calls ({exc})")
        self.ops.update(marked)

    def _marked_ops(self, prof):
        """The aten ops that started between a CALL_MARK and the END_MARK entered right after that call
        returned, in the order the profiler numbered them as they started (correlation ids): never by
        their timestamps, whose clock (the TSC, read on whichever core the thread ran) a loaded or
        virtual machine may skew by microseconds, putting the loop's own gather of the next stamp inside
        the call before it. The marks must alternate, one pair per marked call: a mark the candidate
        entered itself (to end its call's recording early) breaks that. An op of any other thread is
        the candidate's: the loop runs in one. Without raw events, the event tree (each op under its
        mark)."""
        results = getattr(prof, "kineto_results", None)
        if results is None:
            out = set()
            for e in prof.function_events:
                p = e.cpu_parent
                while p is not None and p.name != self.CALL_MARK:
                    p = p.cpu_parent
                if p is not None and e.name.startswith("aten::"):
                    out.add(e.name)
            self.marks_found = self._marks
            return out
        raw = [(e.start_thread_id(), e.correlation_id(), e.name()) for e in results.events()]
        loop_threads = {t for t, _, name in raw if name in (self.CALL_MARK, self.END_MARK)}
        if not loop_threads:
            if self._marks:
                raise RuntimeError(f"none of the {self._marks} marks of the candidate's calls was recorded")
            self.marks_found = 0
            return set()
        # Only the loop's thread runs ops here: any other thread's op during the session is the
        # candidate's (its threads are numbered apart, so they have no place in the loop's order).
        out = {name for t, _, name in raw if t not in loop_threads and name.startswith("aten::")}
        if len(loop_threads) > 1:
            raise RuntimeError("the marks of the calls were entered from more than one thread")
        events = sorted(((c, name) for t, c, name in raw if t in loop_threads), key=lambda ce: ce[0])
        inside, pairs = False, 0
        for _, name in events:
            if name == self.CALL_MARK:
                if inside:
                    raise RuntimeError("a call's mark opened inside another's (a mark the candidate entered)")
                inside = True
            elif name == self.END_MARK:
                if not inside:
                    raise RuntimeError("a call's end mark outside any call (a mark the candidate entered)")
                inside, pairs = False, pairs + 1
            elif inside and name.startswith("aten::"):
                out.add(name)
        if inside:
            raise RuntimeError("the last call's mark has no end mark")
        if pairs != self._marks:
            raise RuntimeError(f"{pairs} marked calls recorded for the {self._marks} the loop made")
        self.marks_found = pairs
        return out

    @contextlib.contextmanager
    def _marked_call(self):
        with self._record_function(self.CALL_MARK):
            yield
        with self._record_function(self.END_MARK):
            pass

    def call_scope(self):
        """Around one call of the timed loop: a pair of marks in the loop's session (the call's, and
        an empty one right after it), or (the dispatch-mode recorder, or no session) a recording of
        its own."""
        if self._session is not None:
            self._marks += 1
            return self._marked_call()
        return self.recording()

    def self_test(self, device):
        """True when this recorder sees a compute op run on `device` (and warms it up)."""
        torch = core.torch_module()
        t = torch.ones(4, 4, device=device)
        self.ops.clear()
        try:
            with self.recording():
                torch.mm(t, t)
        except Exception:  # noqa: BLE001
            return False
        seen = any(core.aten_base(op) == "mm" for op in self.ops)
        self.ops.clear()
        return seen

    def seen(self):
        """Every op recorded, for the judge to decide which are forbidden."""
        return sorted(self.ops)


class Progress:
    """Tells the judge, during a verification call, when Triton starts a compile and when it launches a
    kernel, so that the judge can stop a kernel that hangs after its launch without waiting out the
    whole verification timeout (docs/harness.md, "A hung kernel"). The candidate can forge or drop
    these lines, which only moves its own deadline: no line, the full timeout; a forged launch, an
    earlier stop of its own call."""

    MIN_GAP_S = 0.2  # launches closer than this to the last line are not told again

    def __init__(self):
        self.channel = None
        self.last = ("", 0.0)

    def tell(self, what):
        ch = self.channel
        if ch is None:
            return
        now = _monotonic()
        if what == "launch" and self.last[0] == "launch" and now - self.last[1] < self.MIN_GAP_S:
            return
        self.last = (what, now)
        try:
            ch.send({"ev": "progress", "what": what})
        except OSError:
            self.channel = None


class Launches:
    """Counts Triton kernel launches: the launch hook on a GPU, the interpreter's grid executor on the
    CPU platform."""

    def __init__(self, interpret, progress=None):
        self.count = 0
        tell = progress.tell if progress is not None else (lambda _what: None)
        if interpret:
            from triton.runtime import interpreter
            original = interpreter.GridExecutor.__call__
            counter = self

            def counted(executor, *a, **k):
                if not k.get("warmup", False):
                    counter.count += 1
                    tell("launch")
                return original(executor, *a, **k)

            interpreter.GridExecutor.__call__ = counted
        else:
            from triton import knobs

            def hook(*_a, **_k):
                self.count += 1
                tell("launch")

            knobs.runtime.launch_enter_hook.add(hook)


class Compiles:
    """Runs Triton's compiler outside a dispatch-mode recorder and the poisoned allocator, and counts
    compiles. The compiler is Triton's, bound here before any candidate exists (the candidate's JIT
    functions look it up when they are first called). Code can run at compile time unobserved, so a
    compile during a timed call is reported and rejected by the judge: honest kernels compile in
    their first call."""

    def __init__(self, gpu, progress=None):
        self.count = 0
        self.seconds = 0.0  # in the compiler, all calls (a diagnostic: what of a first call is the compile)
        if not gpu:
            return
        import triton.compiler
        from torch.utils._python_dispatch import _disable_current_modes
        original = triton.compiler.compile
        counter = self
        tell = progress.tell if progress is not None else (lambda _what: None)

        def compile_unobserved(*a, **k):
            counter.count += 1
            tell("compile")
            t0 = _perf_counter()
            try:
                with _disable_current_modes(), core.unpoisoned():
                    return original(*a, **k)
            finally:
                counter.seconds += _perf_counter() - t0

        compile_unobserved.kagent_original = original
        triton.compiler.compile = compile_unobserved


def plain_tensors(out):
    """(list of outputs, problem text or None): only torch.Tensor itself, never a subclass."""
    torch = core.torch_module()
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    for o in outs:
        if type(o) is not torch.Tensor:
            kind = type(o).__name__
            if isinstance(o, torch.Tensor):
                return outs, f"kernel_function returned a torch.Tensor subclass ({kind}); only plain tensors are accepted"
            return outs, f"kernel_function returned {kind}, expected a tensor"
    return outs, None


def warm_triton(buf):
    """Launches a harness-owned Triton kernel once, before any candidate exists, so that the driver
    utilities Triton builds on first use are ready (the candidate still compiles its own kernels)."""
    import triton
    import triton.language as tl
    global _TOUCH
    if _TOUCH is None:
        def touch(ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(ptr + offs, tl.load(ptr + offs, mask=offs < n, other=0), mask=offs < n)
        _TOUCH = triton.jit(touch)
    _TOUCH[(1,)](buf, min(buf.numel(), 1024), BLOCK=1024)


_TOUCH = None


class Slot:
    """A receive buffer of the judge, mapped here: a shared file on the CPU, CUDA IPC on a GPU."""

    def __init__(self, spec, device):
        torch = core.torch_module()
        dtype = core.dtype_of(spec["dtype"]) if spec["dtype"] in ("bfloat16", "float16", "float32") else \
            getattr(torch, spec["dtype"])
        self.shape = tuple(spec["shape"])
        numel = 1
        for d in self.shape:
            numel *= d
        if spec["kind"] == "file":
            flat = torch.from_file(spec["path"], shared=True, size=numel, dtype=dtype)
        else:
            h = spec["handle"]
            storage = torch.UntypedStorage._new_shared_cuda(
                h[0], base64.b64decode(h[1]), h[2], h[3], base64.b64decode(h[4]), h[5],
                base64.b64decode(h[6]) if h[6] else b"", h[7])
            flat = torch.empty(0, dtype=dtype, device=device).set_(storage, 0, (numel,), (1,))
        self.tensor = flat.view(self.shape)

    def put(self, out):
        if out.numel() != self.tensor.numel():
            return f"shape mismatch: got {tuple(out.shape)}, expected {self.shape}"
        self.tensor.copy_(out.reshape(self.shape))
        return None


# The tensor methods the timed loop calls outside the candidate's call (restore, stamp, flush, unstamp,
# keeping outputs in their slots).
LOOP_TENSOR_METHODS = ("copy_", "zero_", "clone", "view", "__getitem__", "__setitem__", "detach", "contiguous",
                       "reshape", "numel", "data_ptr", "element_size", "size", "dim", "is_contiguous", "to")


def harness_code_snapshot(torch, worker_class):
    """What the timed loop calls outside the candidate's call, as it is now: the tensor methods it uses
    (as torch.Tensor resolves them), and every name of this module, of the Worker and OpRecorder
    classes and of harness_core (functions, and the data the checks read). Taken before any
    candidate code runs; a candidate that rebinds one of them (e.g. torch.Tensor.copy_, to compute the
    next answer while the loop stamps its inputs, where nothing times or records it) shows as a change
    (harness_code_changes), and so does one that gives a function other code, defaults or closure
    contents while the function object stays the same (held_by), or changes a list, dict or set the
    checks read (the flag that refuses forks). Not every tensor method: torch rebinds some of its own
    lazily (torch.Tensor.new_empty changed in an honest run)."""
    spaces = {"worker": sys.modules[__name__], "worker.Worker": worker_class, "harness_core": core,
              "worker.OpRecorder": OpRecorder}  # patched_recorder.py rebound its _marked_ops: 1.75 vs 28.6 ms
    snap = {name: {k: held_by(v, contents=f"{name}.{k}" not in CHANGING_DATA) for k, v in vars(obj).items()
                   if not k.startswith("__")}
            for name, obj in spaces.items()}
    snap["torch.Tensor"] = {k: held_by(getattr(torch.Tensor, k, None)) for k in LOOP_TENSOR_METHODS}
    return snap


# Module data that changes in an honest run: the evidence of refused forks, the diagnostic profiles
# taken, the lazily built touch kernel, and the allocation poisoning's state (restored after each
# call, but it keeps the originals it restored).
CHANGING_DATA = frozenset(("worker.forks_refused", "worker._PROFILED", "worker._TOUCH", "harness_core._POISON"))


def held_by(v, contents=True, depth=0):
    """What a name holds, as a tuple of objects compared one by one by identity (harness_code_changes):
    the object itself; for a function (also inside a staticmethod, classmethod or contextmanager) its
    code, defaults and what its closure cells hold, followed into the functions they hold: a function
    whose __code__ was replaced keeps its identity (tests/cheats/matvec/swapped_code.py gave
    OpRecorder.forbidden the code of one that finds nothing: verified at 1.98 ms against the honest
    30.1 ms on the cpu platform); for a list, dict or set, its elements (`contents`): the flag that
    refuses forks is a list's element (forks_unforbidden.py set it back to False: verified at 23.3 ms
    against 30.1 ms)."""
    out = [v]
    f = getattr(v, "__func__", v)
    code = getattr(f, "__code__", None) if isinstance(f, types.FunctionType) else None
    if code is not None:
        out += [f, code, f.__defaults__, f.__kwdefaults__]
        for cell in f.__closure__ or ():
            try:
                c = cell.cell_contents
            except ValueError:  # an empty cell
                c = None
            out += held_by(c, contents, depth + 1) if depth < 3 and isinstance(c, types.FunctionType) else (c,)
    elif contents and isinstance(v, dict):
        for k, x in v.items():
            out += [k, x]
    elif contents and isinstance(v, (list, set, frozenset)):
        out += list(v)
    return tuple(out)


def hooks_snapshot(tables=True):
    """The hooks through which code runs in this thread without the timed loop calling it: the profile
    and trace functions, the audit hooks refused (_refuse_audit_hooks), the Python-level signal
    handlers, the garbage collector's callbacks, (3.12)
    the sys.monitoring tools and PyTorch's mode stacks (bind_torch_hooks). A candidate that installs one can compute between its calls, e.g.
    right after the loop has stamped the inputs (tests/cheats/matvec/hook_in_the_loop.py)."""
    snap = {"sys.setprofile": _getprofile(), "sys.settrace": _gettrace(), "gc.callbacks": tuple(_gc_callbacks),
            "sys.addaudithook (hooks refused)": _audit_hooks_refused()}
    for sig in _signals:
        with contextlib.suppress(Exception):
            snap[f"signal {int(sig)}"] = _getsignal(sig)
    if _monitoring_tool is not None:
        for tool in range(6):
            snap[f"sys.monitoring tool {tool}"] = _monitoring_tool(tool)
    for name, now in _torch_hooks.items():
        if tables or not name.startswith("the dispatch table"):
            with contextlib.suppress(Exception):
                snap[name] = now()
    return snap


def bind_torch_hooks(torch):
    """PyTorch's own routes into code between the calls: a torch function mode or a dispatch mode left
    on runs its handler on every PyTorch call the loop makes (the stamp's copies, the flush;
    tests/cheats/matvec/mode_in_the_loop.py), and so does a kernel of the candidate's registered
    for an op the loop dispatches (torch.library; kernel_in_the_dispatcher.py), or a dispatch key it
    turns on for this thread. Their stacks' lengths, the dispatch tables of the loop's ops (the keys
    that run for a dense CPU or CUDA tensor: a meta kernel a lazy import of torch registers does not
    count) and the thread's included and excluded keys join hooks_snapshot."""
    _torch_hooks.clear()
    for name, attr in (("torch function mode", "_len_torch_function_stack"),
                       ("torch dispatch mode", "_len_torch_dispatch_stack"),
                       ("dispatch keys turned on", "_dispatch_tls_local_include_set"),
                       ("dispatch keys turned off", "_dispatch_tls_local_exclude_set")):
        fn = getattr(torch._C, attr, None)
        if fn is not None:
            _torch_hooks[name] = (lambda f=fn: str(f())) if "keys" in name else fn
    dump = getattr(torch._C, "_dispatch_dump_table", None)
    if dump is None:
        return

    for op in LOOP_ATEN_OPS:
        with contextlib.suppress(Exception):
            dump(op)
            _torch_hooks[f"the dispatch table of {op}"] = (lambda o=op: DispatchTable(dump(o)))


class DispatchTable(str):
    """An op's dispatch table as PyTorch dumps it; two are equal when the same kernels run for dense
    CPU and CUDA tensors (the whole text compared first, the lines of those keys only if it differs)."""

    def running(self):
        return tuple(line for line in self.splitlines() if line.split(":", 1)[0] in RUNNING_KEYS)

    def __eq__(self, other):
        if str.__eq__(self, other):
            return True
        return isinstance(other, DispatchTable) and self.running() == other.running()

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = str.__hash__


# The ops the timed loop dispatches between two calls (stamp, restore, flush, slot copies), and the
# dispatch keys whose kernels run for the dense CPU and CUDA tensors it uses.
LOOP_ATEN_OPS = ("aten::copy_", "aten::clone", "aten::slice.Tensor", "aten::view", "aten::zero_", "aten::detach",
                 "aten::_to_copy", "aten::empty.memory_format", "aten::empty_strided", "aten::as_strided",
                 "aten::fill_.Scalar")
RUNNING_KEYS = frozenset(("CPU", "CUDA", "BackendSelect", "Python", "PythonTLSSnapshot", "PythonDispatcher",
                          "ADInplaceOrView", "AutogradCPU", "AutogradCUDA", "AutogradOther", "AutocastCPU",
                          "AutocastCUDA", "FuncTorchDynamicLayerFrontMode", "FuncTorchDynamicLayerBackMode",
                          "PreDispatch", "Functionalize", "Undefined"))


def hooks_changed(before, tables=True):
    """The hooks of `before` (hooks_snapshot) that differ now, by name. Without `tables`, the dispatch
    tables are left out (about 15 us each to read)."""
    now = hooks_snapshot(tables)
    if not tables:
        before = {k: v for k, v in before.items() if k in now}
    return sorted(k for k in set(before) | set(now) if before.get(k) is not now.get(k) and before.get(k) != now.get(k))


def table_look_rate(n, escape=0.001):
    """The chance of reading the dispatch tables after each of a loop's n calls: at least 1/4, and
    enough that a kernel registered for all but the last call (the last look, after the loop, reads
    every table) dodges all n - 1 looks less than `escape` of the time (0.75 ** 9, 7.5 %, with the
    cpu tests' 10 calls at a fixed 1/4)."""
    if n <= 1:
        return 1.0
    return min(1.0, max(0.25, 1.0 - escape ** (1.0 / (n - 1))))


def harness_code_changes(before, now):
    """The names of `before` (harness_code_snapshot) rebound, removed or changed within (held_by) in
    `now`; a name added since is a change too (a module global the candidate shadowed a builtin with)."""
    def same(a, b):
        return b is not None and len(a) == len(b) and all(x is y for x, y in zip(a, b))
    changed = {f"{space}.{k}" for space, held in before.items() for k, v in held.items()
               if not same(v, now.get(space, {}).get(k))}
    changed |= {f"{space}.{k}" for space, held in now.items() for k in held if k not in before.get(space, {})}
    return sorted(changed)


class Worker:
    def __init__(self, scratch):
        self.scratch = scratch
        self.problem = None
        self.sets = []
        self.pristine = None
        self.slots = []
        self.cand = None
        self.in_place = False
        self.gpu = False
        self.sleep_cycles_per_us = 0.0
        self.shared = None
        self.channel = None
        self.progress = Progress()
        self._hooks = None  # hooks_snapshot() once prepared
        self.hooks_seen = []

    # -- prepare: the problem's inputs on the device, the judge's slots, the timers ------------------
    def op_prepare(self, req):
        torch = core.torch_module()
        device = req["device"]
        self.gpu = device.startswith("cuda")
        self.problem = core.Problem(req["problem"], device, req["dtype"], req.get("size"), seed=None)
        self.sets = [self.problem.inputs_for_seed(s) for s in req["seeds"]]
        self.slots = [Slot(s, device) for s in req["slots"]]
        self.flush_buf = torch.empty(max(1, int(req["flush_bytes"]) // 4), dtype=torch.int32, device=device)
        self.launches = Launches(not self.gpu, self.progress)
        self.recorder = OpRecorder()
        if not self.recorder.self_test(device):
            self.recorder = OpRecorder("dispatch")
        self.compiles = Compiles(self.gpu, self.progress)
        if self.gpu:
            self._event = torch.cuda.Event
            self._elapsed = torch.cuda.Event.elapsed_time
            self._sync = torch.cuda.synchronize
            self._gpu_sleep = torch.cuda._sleep
            self.sleep_cycles_per_us = self.measure_sleep()
            self._captured = {"torch.cuda.Event.elapsed_time": (torch.cuda.Event, "elapsed_time", self._elapsed),
                              "torch.cuda.synchronize": (torch.cuda, "synchronize", self._sync)}
        else:
            self._sync = lambda: None
            self._captured = {}
        self._captured["time.perf_counter"] = (time, "perf_counter", _perf_counter)
        # The timers as this worker holds them: a candidate that rebinds them where it finds them (module
        # globals and instance dicts, through the garbage collector) while leaving the public names
        # alone is seen here too (the originals stay in these tuples, which it does not rewrite).
        self._captured["worker._perf_counter"] = (sys.modules[__name__], "_perf_counter", _perf_counter)
        if self.gpu:
            self._captured["worker._elapsed"] = (self, "_elapsed", self._elapsed)
        if self.gpu and req.get("launcher_dir"):
            try:
                import launchers
                self.shared = launchers.SharedLookup(req["launcher_dir"])
            except Exception:  # noqa: BLE001 - no sharing: every launcher is built here, as before
                self.shared = None
        if self.gpu:
            warm_triton(self.flush_buf)
            # One recorded Triton launch before any candidate: the recorder's one-time start-up (the
            # profiler's, or torch's work for a first launch under a dispatch mode: 3-4 s measured on
            # the H200) is paid here, while the previous candidate runs.
            with core.poisoned_allocations(), self.recorder.recording():
                warm_triton(self.flush_buf)
            self.recorder.ops.clear()
        # The loop's own work once (a flush of the cache-sized buffer: on the CPU a parallel fill,
        # which starts PyTorch's intra-op threads), so that every thread the harness needs exists
        # before the judge counts them (judge.thread_count at ready).
        self.flush_buf.zero_()
        # PyTorch's intra-op threads on the host too (a parallel fill), which a candidate's CPU-side
        # fill on a GPU platform would otherwise start during its calls.
        torch.empty(1 << 18, dtype=torch.float32).zero_()
        self._sync()
        self.threads_at_start = threading.active_count()
        bind_torch_hooks(torch)
        # No fork from here on (this process forks nothing; Triton's compiler runs through exec): the flag
        # is set before the snapshot below, which then holds it set.
        forbid_forks()
        self._harness_code = harness_code_snapshot(torch, type(self))  # after the hooks are bound: they are data it holds
        self._hooks = hooks_snapshot()
        self.hooks_seen = []
        return {"ev": "ready", "threads": self.threads_at_start, "input_bytes": self.problem.input_bytes(),
                "recorder": self.recorder.kind, "launchers": self.shared.take() if self.shared else []}

    def measure_sleep(self):
        """Device clock cycles per microsecond of torch.cuda._sleep, measured with events."""
        torch = core.torch_module()
        best = None
        for _ in range(3):
            s, e = self._event(enable_timing=True), self._event(enable_timing=True)
            s.record()
            self._gpu_sleep(1_000_000)
            e.record()
            self._sync()
            us = self._elapsed(s, e) * 1e3
            if us > 0:
                best = max(best or 0.0, 1_000_000 / us)
        del torch
        return best or 1000.0

    # -- load: import the candidate -------------------------------------------------------------------
    def op_load(self, req):
        path = req["path"]
        with open(path, encoding="utf-8") as f:
            source = f.read()
        forbid_forks()  # from the candidate's import on (the fork server forked this process before)
        self.cand = core.load_candidate(path, source)
        return {"ev": "loaded", "import_s": self.cand.import_s}

    def call(self, inputs):
        torch = core.torch_module()
        with torch.no_grad():
            return core.call_candidate(self.problem, self.cand, inputs)

    # -- verify: one call per (set, slots); outputs go to the judge's slots ---------------------------
    def op_verify(self, req):
        self.progress.channel = self.channel
        try:
            return self._verify(req)
        finally:
            self.progress.channel = None

    def _verify(self, req):
        torch = core.torch_module()
        calls = []
        with core.working_directory(os.path.dirname(os.path.abspath(self.cand.path))):
            for c in req["calls"]:
                inputs = self.sets[c["set"]]
                if self.pristine is not None:
                    inputs = self.restore(c["set"])
                before, compile_before = self.launches.count, self.compiles.seconds
                t0 = _perf_counter()
                try:
                    with core.poisoned_allocations(), self.recorder.recording():
                        args, kwargs = core.bind_arguments(self.cand.fn, inputs, self.problem.named)
                        out = self.cand.fn(*args, **kwargs)
                    if out is None:
                        out = args[0]
                        if self.pristine is None:
                            self.in_place = True
                    self._sync()
                except core.CandidateError:
                    raise
                except BaseException as exc:  # noqa: BLE001
                    msg, tb = core.describe_exception(exc)
                    raise core.CandidateError(msg, tb, core.is_poisoning(tb)) from None
                wall = _perf_counter() - t0
                outs, problem = plain_tensors(out)
                problem = fork_evidence() or problem
                info = {"set": c["set"], "launches": self.launches.count - before, "wall_s": wall,
                        "compile_s": self.compiles.seconds - compile_before,
                        "aten": self.recorder.seen(), "integrity": problem,
                        "out": [{"shape": list(o.shape), "dtype": str(o.dtype).replace("torch.", "")}
                                for o in outs if torch.is_tensor(o)]}
                self.recorder.ops.clear()
                if problem is None:
                    for o, s in zip(outs, c["slots"]):
                        err = self.slots[s].put(o.detach() if o.requires_grad else o)
                        if err:
                            info["error"] = err
                self._sync()
                calls.append(info)
                if self.in_place and self.pristine is None:
                    # From now on every call starts from a pristine copy of its inputs.
                    self.pristine = [[t.clone() if torch.is_tensor(t) else t for t in s] for s in self.sets]
        reply = {"ev": "verified", "calls": calls,
                 "patched_harness": harness_code_changes(self._harness_code, harness_code_snapshot(torch, type(self))),
                 "launchers": self.shared.take() if self.shared else [],
                 "launcher_hits": self.shared.hits if self.shared else None,
                 "threads": threading.active_count(), "in_place": self.in_place}
        if req.get("asm", True):
            # The compiled kernels, for the dedup hash; the judge asks with its last verification call.
            kind, texts = core.compiled_asm(self.cand.module)
            reply["asm"] = {"kind": kind, "hash": core.sha256("\n\x00\n".join(sorted(texts))) if texts else None,
                            "kernels": len(texts)}
        return reply

    def restore(self, j):
        for dst, src in zip(self.sets[j], self.pristine[j]):
            if hasattr(dst, "copy_") and hasattr(src, "copy_"):
                dst.copy_(src)
        return self.sets[j]

    # -- the timed loop (shared by calibration and the candidate) ------------------------------------
    @staticmethod
    def stamp(inputs, stamp):
        """Rolls a window of each input by the judge's shift, so that no call sees the contents of an
        earlier one (a cache keyed by address, id or content returns a stale answer). Returns the
        windows' former contents, for unstamp.

        The result is exactly `view.roll(shift)` (what the judge applies to its copy), done as two
        slice copies from a saved copy of the window: on an H100 torch.roll of a 256 MiB window took
        0.82 ms and rolling it back as long again, 1.6 ms of the loop's 2.2 ms per call on matvec
        (benchmarks/h200/probe_loop.py)."""
        saved = []
        for k, start, length, shift, *rest in stamp:
            view = inputs[k].view(-1)[start:start + length]
            old = view.clone()
            mult = rest[0] if rest else 1
            if mult == 1:
                view[:shift].copy_(old[length - shift:])
                view[shift:].copy_(old[:length - shift])
            else:  # a small input, permuted whole (core.stamp_index)
                view.copy_(old[core.stamp_index(length, shift, mult, view.device)])
            saved.append((view, old))
        return saved

    @staticmethod
    def unstamp(saved):
        """Puts back what stamp() changed, from its saved copies."""
        for view, old in saved:
            view.copy_(old)

    def loop(self, fn, n, stamps, keep, set_of=None, pad_us=0.0, issue=None, flush=True, watch=False, hooks=True):
        """n calls of fn; before each, its stamp and (with `flush`) an L2 flush; after each, the device is
        synchronised (work on another stream counts) and the judge says whether to keep the output.
        Returns the per-call times in ms, read with the timers bound at start-up.

        On a GPU, `pad_us` of device sleep is queued before each start event: the host then issues
        the whole call while the device is still asleep, so the time between the events is the
        device's, not the host's launch gaps (a call of three launches read 2-10 % high without it
        on the H200). `issue`, a list, receives the host time to issue each call (µs). With `watch`, each
        call is marked for the op recorder (recorder.call_scope, outside the timed span), and the ops
        inside the marks join self.recorder.ops when op_time's recorder.loop_session ends. Without
        `hooks`, the hooks are not compared after each call (the warm-up calls before the watched ones)."""
        times = []
        nsets = len(self.sets)
        cycles = int(pad_us * self.sleep_cycles_per_us) if self.gpu else 0
        look_below = int(table_look_rate(n) * 65536)  # of 65536: a look when two random bytes fall below
        for i in range(n):
            j = set_of(i) if set_of else i % nsets
            inputs = self.restore(j) if self.pristine is not None else self.sets[j]
            saved = None
            if stamps:
                saved = self.stamp(inputs, stamps[i])
                stamps[i] = None  # what this call's inputs are, out of the candidate's reach (as far as Python goes)
            if flush:
                self.flush_buf.zero_()
            # The recorder's mark opens and closes outside the timed span: inside it, on an H100, it put
            # host time into the device's (do_bench agreement 1.70 % at worst, 0.42 % without).
            # Nothing of the loop's own dispatches an aten op inside the mark.
            with (self.recorder.call_scope() if watch else contextlib.nullcontext()):
                if self.gpu:
                    start, end = self._event(enable_timing=True), self._event(enable_timing=True)
                    if cycles > 0:
                        self._gpu_sleep(cycles)
                    start.record()
                    t_issue = _perf_counter()
                    out = fn(*inputs)
                    if issue is not None:
                        issue.append((_perf_counter() - t_issue) * 1e6)
                    end.record()
                    self._sync()
                    times.append(self._elapsed(start, end))
                else:
                    t0 = _perf_counter()
                    out = fn(*inputs)
                    times.append((_perf_counter() - t0) * 1e3)
            if saved and self.pristine is None:
                self.unstamp(saved)
            saved = None
            if hooks and self._hooks is not None and not self.hooks_seen:
                # After the call, before the next stamp: a hook that would compute once the stamp has
                # landed is installed now (one that removed itself here is gone for that stamp).
                # The dispatch tables after a call at random, at a rate drawn from the loop's length
                # (table_look_rate): a kernel registered for the loop's ops must stay registered after
                # every call it helps but the last, and cannot dodge every look.
                self.hooks_seen = hooks_changed(self._hooks, tables=int.from_bytes(_urandom(2), "big") < look_below)
            if keep is not None:
                slots = keep(i)
                if slots is not None:
                    # Every output of the call, each into its slot (a problem may return several).
                    outs, problem = plain_tensors(inputs[0] if out is None else out)
                    if problem:
                        raise core.CandidateError(problem)
                    for o, slot in zip(outs, slots if isinstance(slots, list) else [slots]):
                        self.slots[slot].put(o.detach() if o.requires_grad else o)
                    self._sync()
        if keep is not None and self._hooks is not None and not self.hooks_seen:
            # Every dispatch table once more after the last timed call: a kernel that stayed registered
            # escaped the sampled looks above one run in eighteen with the cpu tests' 10 calls
            # (0.75 ** 10; kernel_in_the_dispatcher.py was verified so in a ctest run).
            self.hooks_seen = hooks_changed(self._hooks, tables=True)
        return times

    def op_time(self, req, channel, calibrate=False):
        """The candidate's timed loop; with `calibrate`, the same loop around a call that does nothing,
        run before any candidate code exists, so the judge can measure the loop's own overhead."""
        warmup, repeat = int(req["warmup"]), int(req["repeat"])
        # The warm-up calls' stamps (none) and the first timed call's; each next one comes with the
        # judge's answer to the call before it (keep), so no call's stamp exists here before it is due.
        first = req.pop("stamps")
        warm_stamps, timed_stamps = first[:warmup], first[warmup:warmup + 1]
        cand = self.cand
        args_of = {}
        if calibrate:
            first = self.sets[0]
            noop_out = first[0] if first else None

        def fn(*inputs):
            if calibrate:
                return noop_out
            key = id(inputs[0]) if inputs else 0
            if key not in args_of:
                args_of[key] = core.bind_arguments(cand.fn, list(inputs), self.problem.named)
            a, k = args_of[key]
            return cand.fn(*a, **k)

        def keep(i):
            channel.send({"ev": "called", "i": i})
            answer = channel.recv()
            if answer.get("stamp") is not None:
                timed_stamps.append(answer["stamp"])
            return answer.get("keep")

        counts = []

        compiled = [0]

        def counted(*inputs):
            before, c0 = self.launches.count, self.compiles.count
            out = fn(*inputs)
            counts.append(self.launches.count - before)
            compiled[0] += self.compiles.count - c0
            return out

        torch = core.torch_module()
        where = self.scratch if calibrate else os.path.dirname(os.path.abspath(cand.path))
        with core.working_directory(where), torch.no_grad():
            try:
                self.recorder.ops.clear()
                # Warm-up calls are neither checked nor timed: no stamp (the judge sends none) and no
                # flush, as do_bench warms up. All but the last core.WATCHED_WARMUPS run unwatched (no op
                # recorder, no hook comparison): what a candidate computes there, PyTorch or not, cannot
                # serve a timed call, whose stamp does not exist yet (each comes with the judge's answer
                # to the call before it), and a hook it leaves in place is seen at the timed calls.
                # The recorder and the hooks cost per call (host time while the device waits), and a
                # run's default is 25 warm-up calls.
                watched = min(warmup, core.WATCHED_WARMUPS)
                self.loop(counted, warmup - watched, warm_stamps[:warmup - watched], keep=None, flush=False,
                          hooks=False)
                with self.recorder.loop_session():
                    issue = []
                    # The last warm-up calls under the op recorder, as the timed calls below: the device
                    # sleep is sized from these calls' issue times, which the recorder's per-op work
                    # lengthens.
                    self.loop(counted, watched, warm_stamps[warmup - watched:], keep=None, issue=issue, flush=False,
                              watch=True)
                    pad_us = 0.0
                    if self.gpu and not calibrate:
                        # The watched warm-up calls' issue times (the first one, the recorder's first, left out),
                        # with margin; the judge bounds what it credits of this (it is forgeable).
                        steady = sorted(issue[1:] or issue)
                        if steady:
                            pad_us = min(float(req.get("max_pad_us", 0.0)), 1.5 * steady[len(steady) // 2] + 20.0)
                    channel.send({"ev": "warm"})
                    # Every timed call under the op recorder, as the verification calls are (and the
                    # calibration's no-op calls, so the judge's wall bound counts its cost): a
                    # candidate that ran PyTorch's own product wherever no recorder was on
                    # (tests/cheats/matvec/unwatched_torch.py) was verified at 1.64 ms against the honest
                    # 25.8 ms on the cpu platform.
                    times = self.loop(counted, repeat, timed_stamps, keep=keep, pad_us=pad_us, watch=True)
                timed_ops = self.recorder.seen()
                self.recorder.ops.clear()
            except core.CandidateError:
                raise
            except BaseException as exc:  # noqa: BLE001
                msg, tb = core.describe_exception(exc)
                raise core.CandidateError(msg, tb, core.is_poisoning(tb)) from None
        patched = sorted(name for name, (owner, attr, fn0) in self._captured.items() if getattr(owner, attr, None) is not fn0)
        harness = harness_code_changes(self._harness_code, harness_code_snapshot(torch, type(self)))
        return {"ev": "timed", "times_ms": times, "launches": counts[warmup:], "patched": patched, "aten": timed_ops,
                "marks": self.recorder.marks_found, "mark_problem": self.recorder.mark_problem,
                "forks": fork_evidence(),
                "patched_harness": harness, "hooks": list(self.hooks_seen), "pad_us": pad_us,
                "threads": threading.active_count(), "compiles": compiled[0]}


class Channel:
    def __init__(self, fd):
        self.rfd, self.wfd = os.dup(fd), os.dup(fd)
        os.close(fd)
        os.set_inheritable(self.rfd, False)
        os.set_inheritable(self.wfd, False)
        self.buf = b""

    def send(self, obj):
        data = (json.dumps(obj, default=str) + "\n").encode()
        while data:
            data = data[os.write(self.wfd, data):]

    def recv(self):
        while b"\n" not in self.buf:
            chunk = os.read(self.rfd, 1 << 16)
            if not chunk:
                raise EOFError("the judge went away")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)


def profiled(what, fn, req):
    """fn(req), under cProfile when KAGENT_WORKER_PROFILE names a directory (a diagnostic for the
    device: where a candidate's first call spends its time). Its first use per worker is kept."""
    where = os.environ.get("KAGENT_WORKER_PROFILE")
    if not where or what in _PROFILED:
        return fn(req)
    _PROFILED.add(what)
    import cProfile
    import io
    import pstats
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    try:
        return prof.runcall(fn, req)
    finally:
        wall = time.perf_counter() - t0
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(45)
        with contextlib.suppress(OSError):
            with open(os.path.join(where, f"worker_{os.getpid()}_{what}.txt"), "w", encoding="utf-8") as f:
                f.write(f"{what}: {wall:.4f} s wall\n{buf.getvalue()}")


_PROFILED = set()


def serve(fd, scratch):
    """One candidate's protocol loop on `fd`; returns the exit status."""
    channel = Channel(fd)
    torch = core.torch_module()
    import triton  # noqa: F401 - part of the warm-up: the candidate should not pay for it
    worker = Worker(scratch)
    worker.channel = channel
    channel.send({"ev": "hello", "pid": os.getpid(), "torch": torch.__version__})
    while True:
        try:
            req = channel.recv()
        except (EOFError, ValueError):
            return 0
        op = req.get("op")
        try:
            if op == "prepare":
                reply = worker.op_prepare(req)
            elif op == "load":
                reply = profiled("load", worker.op_load, req)
            elif op == "verify":
                reply = profiled("verify", worker.op_verify, req)
            elif op == "time":
                reply = worker.op_time(req, channel)
            elif op == "calibrate":
                reply = worker.op_time(req, channel, calibrate=True)
            elif op == "exit":
                return 0
            else:
                reply = {"ev": "error", "kind": "bad_request", "error": f"unknown op {op!r}"}
        except core.CandidateError as exc:
            reply = {"ev": "error", "kind": "poisoned" if exc.poisoned else "candidate_error", "error": str(exc),
                     "traceback": exc.traceback_text}
        except BaseException as exc:  # noqa: BLE001
            import traceback
            tb = traceback.format_exc()
            reply = {"ev": "error", "kind": "poisoned" if core.is_poisoning(tb) else "harness_error",
                     "error": f"{type(exc).__name__}: {exc}", "traceback": tb[-core.TAIL_CHARS:]}
        if reply.get("ev") == "error":
            reply["integrity"] = fork_evidence()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        try:
            channel.send(reply)
        except OSError:
            return 0


def zygote(ctl_fd):
    """The fork server: imports torch and triton once (no device is touched here, so a child may
    still initialise CUDA), then forks one fresh worker per request. It runs no candidate code. It
    is not dumpable, and neither are its children, so a candidate cannot ptrace or read the memory of
    the zygote or of the next worker."""
    import ctypes
    import signal
    import socket
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
    import privileges
    privileges.drop_all()
    ctl = socket.socket(fileno=ctl_fd)
    core.torch_module()
    import triton  # noqa: F401
    import torch.utils._python_dispatch  # noqa: F401 - the worker's recorder, imported once here
    exited = {}

    def reap(*_):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            exited[pid] = status

    signal.signal(signal.SIGCHLD, reap)

    def send(obj):
        ctl.send(json.dumps(obj).encode())

    send({"ev": "hello", "pid": os.getpid()})
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(ctl, 1 << 16, 1)
        except OSError:
            return 0
        if not data:
            return 0
        req = json.loads(data)
        op = req.get("op")
        if op == "fork":
            if not fds:
                send({"ev": "error", "error": "fork needs a channel fd"})
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            zygote_pid = os.getpid()
            pid = os.fork()
            if pid == 0:
                status = 1
                try:
                    # A worker dies with the fork server (which dies with the judge): without a
                    # sandbox's PID namespace, an orphaned worker of a hanging candidate was seen
                    # spinning at 90 % CPU for an hour after its test had ended.
                    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
                    if os.getppid() != zygote_pid:
                        os._exit(1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    ctl.close()
                    scratch = req["scratch"]
                    for name, target in (("candidate.stdout", 1), ("candidate.stderr", 2)):
                        f = os.open(os.path.join(scratch, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                        os.dup2(f, target)
                        os.close(f)
                    os.chdir(scratch)
                    os.environ["TMPDIR"] = os.path.join(scratch, "tmp")
                    os.environ["TRITON_CACHE_DIR"] = os.path.join(scratch, "triton")
                    import tempfile
                    tempfile.tempdir = None
                    import faulthandler
                    faulthandler.enable(file=sys.stderr, all_threads=False)
                    status = serve(fds[0], scratch)
                finally:
                    os._exit(status)
            os.close(fds[0])
            send({"ev": "forked", "pid": pid})
        elif op == "status":
            pid = int(req.get("pid", 0))
            reap()
            st = exited.get(pid)
            send({"ev": "status", "pid": pid, "exited": st is not None,
                  "signal": os.WTERMSIG(st) if st is not None and os.WIFSIGNALED(st) else 0,
                  "code": os.WEXITSTATUS(st) if st is not None and os.WIFEXITED(st) else None})
        else:
            for fd in fds:
                os.close(fd)
            send({"ev": "error", "error": f"unknown op {op!r}"})


def main(argv=None):
    ap = argparse.ArgumentParser(description="single-use candidate process, or the fork server that makes them")
    ap.add_argument("--fd", type=int, required=True)
    ap.add_argument("--scratch", default=None)
    ap.add_argument("--zygote", action="store_true", help="serve fork requests on --fd (a SOCK_SEQPACKET end)")
    args = ap.parse_args(argv)
    if args.zygote:
        return zygote(args.fd)
    import faulthandler
    faulthandler.enable(file=sys.stderr, all_threads=False)
    return serve(args.fd, args.scratch)


if __name__ == "__main__":
    sys.exit(main())
