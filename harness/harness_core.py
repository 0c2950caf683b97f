"""Shared evaluation logic of the warm evaluator server (evaluator.py) and the one-shot runner (run_once.py).

Everything here works on one device and one loaded problem at a time: the problem's inputs and reference
output are built once, on the device, and reused by every candidate. torch and triton are imported
lazily (the ban check, the hash normalisation and the protocol need neither), so that a TRITON_INTERPRET
decision can still be made when the first problem is loaded.
"""
import contextlib
import gc
import hashlib
import importlib.util
import inspect
import io
import math
import os
import re
import statistics
import sys
import time
import tokenize

TAIL_CHARS = 4000

# The warm-up calls at the end of a timed loop's warm-up that run under the op recorder and the hook
# comparison; the earlier ones run unwatched (worker.Worker.op_time). The judge expects this many
# marked warm-up calls, and the worker's reply does not say it: the reply is the candidate's to forge.
WATCHED_WARMUPS = 3

# Ops a kernel wrapper may dispatch while it runs: allocation, views, copies, fills and scalar reads.
# Anything else is PyTorch doing the computation (SPEC 3.1 forbids it; the ban regex is the cheap
# first filter, this is the second). The judge applies it to every op the worker's recorder saw.
ALLOWED_ATEN = frozenset("""
empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like ones ones_like full full_like
new_zeros new_ones new_full fill fill_ zero zero_ copy copy_ clone _to_copy to contiguous detach detach_
alias lift_fresh lift_fresh_copy view _unsafe_view reshape _reshape_alias as_strided t transpose permute
expand expand_as squeeze unsqueeze select slice narrow split split_with_sizes chunk unbind flatten unflatten
view_as view_as_real view_as_complex _local_scalar_dense resize_ set_ is_same_size arange resolve_conj resolve_neg
is_nonzero item numpy sym_size sym_stride sym_numel sym_storage_offset stride size dim _has_compatible_shallow_copy_type
""".split())


def aten_base(name):
    """'aten::empty.memory_format' -> 'empty'."""
    n = name.split("::", 1)[-1]
    return n.split(".", 1)[0]


def forbidden_ops(ops):
    """The ops of `ops` (names as the recorder gives them) that are PyTorch computing, sorted."""
    return sorted(str(op) for op in ops if aten_base(str(op)) not in ALLOWED_ATEN)

# --------------------------------------------------------------------------------------------------
# Static ban check (SPEC 3.1): run on the source with comments and docstrings removed, so that a
# candidate that merely *mentions* torch.matmul in an explanation is not rejected.

BANNED = [
    (r"\bimport\s+torch\.nn\b", "import of torch.nn"),
    (r"\bfrom\s+torch\.nn\b", "import from torch.nn"),
    (r"\bfrom\s+torch\s+import\s+[^\n;]*\bnn\b", "import of torch.nn"),
    (r"\btorch\.nn\.", "torch.nn usage"),
    (r"(?<![\w.])F\.\w+\s*\(", "torch.nn.functional call (F.<name>)"),
    (r"\btorch\.conv\w*", "torch.conv* usage"),
    (r"\btorch\.(?:relu|sigmoid|tanh|softmax|gelu|mish|hardtanh|max_pool|avg_pool)\w*\s*\(",
     "PyTorch activation/pooling call"),
    (r"\bclass\s+\w+\s*\(\s*(?:torch\.)?nn\.Module", "nn.Module subclass"),
    (r"\.forward\s*\(", "call of .forward()"),
    (r"\btorch\.ops\.aten\b", "torch.ops.aten usage"),
    (r"\btorch\.(?:matmul|mm|bmm)\s*\(", "PyTorch matmul (torch.matmul/mm/bmm)"),
    (r"\.(?:matmul|mm|bmm)\s*\(", "PyTorch matmul method (.matmul/.mm/.bmm)"),
    (r"\.einsum\s*\(", "einsum"),
    (r"\bimport\s+inspect\b|\bfrom\s+inspect\s+import\b", "import of inspect"),
    (r"\binspect\.(?:stack|currentframe|getouterframes)\s*\(", "frame inspection"),
    (r"\bsys\._getframe\s*\(", "sys._getframe"),
    (r"\.f_(?:locals|globals)\b", "frame locals/globals access"),
    (r"\bglobals\s*\(\s*\)", "globals()"),
    (r"\blocals\s*\(\s*\)", "locals()"),
    # Not PyTorch, but the same escape: on the cpu platform a tensor is host memory, and NumPy computes
    # on it outside Triton and outside the op recorder (tests/cheats/matvec/numpy_in_the_call.py was
    # verified 19x faster than the honest kernel). Only the cheap filter: docs/harness.md says what an
    # obfuscated route still does.
    (r"\bimport\s+numpy\b|\bfrom\s+numpy\b", "import of numpy (computation outside Triton)"),
    (r"\.numpy\s*\(", "tensor .numpy() (computation outside Triton)"),
]
_BANNED_RE = [(re.compile(p), why) for p, why in BANNED]


def strip_comments_and_docstrings(source):
    """The source with comments and triple-quoted strings blanked out (other strings may be code).

    Spans are replaced in place, keeping every other character and newline, so the patterns below
    see the candidate's code exactly as written.
    """
    try:
        lines = io.StringIO(source).readlines()  # the same line split tokenize uses
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line))
        chars = list(source)
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            triple = tok.type == tokenize.STRING and re.match(r"^[rbuRBUfF]*('\'\'|\"\"\")", tok.string)
            if tok.type == tokenize.COMMENT or triple:
                start = offsets[tok.start[0] - 1] + tok.start[1]
                end = offsets[tok.end[0] - 1] + tok.end[1]
                for i in range(start, end):
                    if chars[i] != "\n":
                        chars[i] = " "
        return "".join(chars)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        # Not valid Python: strip what we can with regexes; the import will report the syntax error.
        no_triple = re.sub(r"(?s)('\'\'.*?'\'\'|\"\"\".*?\"\"\")", "''", source)
        return re.sub(r"#[^\n]*", "", no_triple)


def ban_check(source):
    """None when the source is allowed, else "Disallowed PyTorch usage detected: <reason>"."""
    stripped = strip_comments_and_docstrings(source)
    for rx, why in _BANNED_RE:
        m = rx.search(stripped)
        if m:
            return f"Disallowed PyTorch usage detected: {why} ({' '.join(m.group(0).split())!r})"
    return None


# --------------------------------------------------------------------------------------------------
# Hash normalisation (SPEC 2.3): identical compiled code must hash alike whatever the register
# numbering, debug info or comments.

_PTX_DROP = re.compile(r"^\s*(\.version|\.target|\.address_size|\.loc|\.file|\.section\s+\.debug)\b")
_PTX_REG = re.compile(r"%(rd|rs|r|fd|f|p)(\d+)\b")
_PTX_LABEL = re.compile(r"\$L__\w+|\bLBB\d+_\d+\b")


def normalize_ptx(ptx):
    text = re.sub(r"(?s)/\*.*?\*/", "", ptx)
    lines = []
    in_debug = False
    for line in text.splitlines():
        line = re.sub(r"//.*", "", line)
        if re.match(r"^\s*\.section\s+\.debug", line):
            in_debug = True
            continue
        if in_debug:
            if line.strip() == "}":
                in_debug = False
            continue
        if _PTX_DROP.match(line) or not line.strip():
            continue
        lines.append(line)
    body = "\n".join(lines)
    regs, labels, per_class = {}, {}, {}

    def reg(m):
        key = (m.group(1), m.group(2))
        if key not in regs:  # numbered in order of first use, per register class
            regs[key] = per_class.get(key[0], 0)
            per_class[key[0]] = regs[key] + 1
        return f"%{m.group(1)}{regs[key]}"

    def label(m):
        labels.setdefault(m.group(0), f"L{len(labels)}")
        return labels[m.group(0)]

    # Register declarations (".reg .b32 %r<42>;") carry counts, not names; keep them literal.
    body = _PTX_REG.sub(reg, body)
    body = _PTX_LABEL.sub(label, body)
    return "\n".join(" ".join(line.split()) for line in body.splitlines())


def normalize_amdgcn(asm):
    lines = []
    for line in asm.splitlines():
        line = re.sub(r"[;#].*|//.*", "", line)
        if re.match(r"^\s*(\.amdgcn_target|\.file|\.loc|\.ident|\.section\s+\.debug|\.cfi_)", line):
            continue
        if line.strip():
            lines.append(" ".join(line.split()))
    labels = {}

    def label(m):
        labels.setdefault(m.group(0), f"L{len(labels)}")
        return labels[m.group(0)]

    return re.sub(r"\.LBB\d+_\d+|\.Ltmp\d+|\.Lfunc_end\d+", label, "\n".join(lines))


def normalize_source(source):
    """Token stream without comments, docstrings and layout: formatting-only edits hash alike."""
    try:
        toks = [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline)
                if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                                  tokenize.DEDENT, tokenize.ENDMARKER)
                and not (t.type == tokenize.STRING and re.match(r"^[rbuRBUfF]*('''|\"\"\")", t.string))]
        return " ".join(toks)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return " ".join(source.split())


def sha256(text):
    return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------------------------------
# Failure classification.

POISON_MARKERS = ("illegal memory access", "illegal instruction", "misaligned address", "CUDA error",
                  "CUDA_ERROR_", "HIP error", "hipError", "device-side assert", "unspecified launch failure",
                  "HSA_STATUS_ERROR", "Memory access fault")
INTERPRETER_HINT = ("the CPU platform runs Triton's interpreter (TRITON_INTERPRET=1): loop bounds and range() "
                    "arguments must be tl.constexpr (e.g. `K: tl.constexpr`), and GPU-only features (inline "
                    "asm, device intrinsics) do not run there")


def is_poisoning(text):
    return any(m in text for m in POISON_MARKERS)


def describe_exception(exc):
    """One message for a candidate exception, with the CPU-interpreter hint where it applies."""
    import traceback
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    msg = f"{type(exc).__name__}: {exc}"
    if os.environ.get("TRITON_INTERPRET") == "1" and (
            "InterpreterError" in text or "only 0-dimensional arrays" in text or "interpreter" in text.lower()):
        msg += "\nHint: " + INTERPRETER_HINT
    return msg, text[-TAIL_CHARS:]


class ProblemError(Exception):
    """The kernel directory's problem.py failed (its import, Model, get_inputs or the reference): the
    user's mistake, never blamed on a kernel. The message names the file and its line."""

    def __init__(self, message, traceback_text=""):
        super().__init__(message)
        self.traceback_text = traceback_text


def problem_error(exc, path):
    """A ProblemError for `exc` raised while running problem.py at `path`: "problem.py line 7: ..."."""
    import traceback as tb_mod
    path = os.path.abspath(path)
    line = None
    if isinstance(exc, SyntaxError) and exc.filename and os.path.abspath(exc.filename) == path:
        line = exc.lineno
    for frame in tb_mod.extract_tb(exc.__traceback__):
        if os.path.abspath(frame.filename) == path:
            line = frame.lineno
    where = f"{os.path.basename(path)} line {line}" if line else os.path.basename(path)
    text = "".join(tb_mod.format_exception(type(exc), exc, exc.__traceback__))
    return ProblemError(f"{where}: {type(exc).__name__}: {exc}", text[-TAIL_CHARS:])


@contextlib.contextmanager
def blame_problem(path):
    """Whatever problem.py raises inside this block becomes a ProblemError naming its line."""
    try:
        yield
    except (ProblemError, KeyboardInterrupt):
        raise
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any failure of the user's file is theirs
        raise problem_error(exc, path) from exc


class CandidateError(Exception):
    """A candidate failed in a way the harness reports (not a harness bug)."""

    def __init__(self, message, traceback_text="", poisoned=False):
        super().__init__(message)
        self.traceback_text = traceback_text
        self.poisoned = poisoned


# --------------------------------------------------------------------------------------------------
# Output capture at the OS level: the candidate's prints, Triton's compiler messages and a
# faulthandler dump all land in per-request files, never in the protocol channel.

class Capture:
    def __init__(self, directory):
        self.dir = directory
        self.stdout = ""
        self.stderr = ""

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self._saved = (os.dup(1), os.dup(2))
        self._files = [open(os.path.join(self.dir, n), "w+b") for n in ("request.stdout", "request.stderr")]
        os.dup2(self._files[0].fileno(), 1)
        os.dup2(self._files[1].fileno(), 2)
        return self

    def __exit__(self, *exc):
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os.dup2(self._saved[0], 1)
        os.dup2(self._saved[1], 2)
        for fd in self._saved:
            os.close(fd)
        tails = []
        for f in self._files:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - TAIL_CHARS))
            tails.append(f.read().decode(errors="replace"))
            f.close()
        self.stdout, self.stderr = tails
        return False


@contextlib.contextmanager
def working_directory(path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


# --------------------------------------------------------------------------------------------------
# Lazy torch/triton.

def torch_module():
    import torch
    return torch


def dtype_of(name):
    torch = torch_module()
    table = {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float16": torch.float16,
             "fp16": torch.float16, "half": torch.float16, "float32": torch.float32, "fp32": torch.float32}
    if name not in table:
        raise ValueError(f"unknown dtype {name!r}; expected one of bfloat16, float16, float32")
    return table[name]


def default_tolerance(dtype_name):
    """The examples' test.py semantics: 1e-2 for the 16-bit types; KernelBench's 1e-4 for fp32."""
    return (1e-2, 1e-2) if dtype_name in ("bfloat16", "bf16", "float16", "fp16", "half") else (1e-4, 1e-4)


def stamp_index(length, shift, mult, device):
    """Where each element of a stamped window comes from: new[i] = old[(mult * i - shift) mod length].
    mult 1 is a roll by `shift` (the window stamps of large inputs); mult coprime to length, with the
    whole tensor as its window, is an affine permutation of every element (the stamps of small inputs),
    one of about length**2 / 2, drawn by the judge for each timed call."""
    torch = torch_module()
    return (torch.arange(length, device=device, dtype=torch.int64) * int(mult) - int(shift)) % int(length)


def synchronize(device):
    torch = torch_module()
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def import_fresh(path, name_hint="candidate"):
    """Imports `path` as a brand-new module (never a cached one), with its directory on sys.path."""
    import_fresh.counter = getattr(import_fresh, "counter", 0) + 1
    name = f"kagent_{name_hint}_{os.getpid()}_{import_fresh.counter}"
    directory = os.path.dirname(os.path.abspath(path))
    if directory not in sys.path:
        sys.path.insert(0, directory)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses, pickling and triton's source lookup expect it
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


# Names the kernel may request by name, taken from the Model (SPEC 3.3's vocabulary).
VOCABULARY = ("weight", "w", "bias", "conv_bias", "add_bias", "stride", "padding", "dilation",
              "output_padding", "groups", "eps", "num_groups", "normalized_shape", "kernel_size", "dim",
              "negative_slope", "min_val", "max_val", "beta", "threshold", "alpha", "lambd", "upper",
              "lower", "p", "features")


def named_params(model, init_inputs):
    named = {}
    try:
        bound = inspect.signature(type(model).__init__).bind(model, *init_inputs)
        named.update({k: v for k, v in bound.arguments.items() if k != "self"})
    except (TypeError, ValueError):
        pass
    for name in VOCABULARY:
        if name not in named and hasattr(model, name):
            value = getattr(model, name)
            if callable(value) and not hasattr(value, "shape"):
                continue
            if isinstance(value, tuple) and value and all(v == value[0] for v in value):
                value = value[0]  # uniform tuples collapse to scalars
            named[name] = value
    if "weight" in named and "w" not in named:
        named["w"] = named["weight"]
    return named


def bind_arguments(fn, inputs, named):
    """Positional inputs first, then parameters the signature names from `named`; **kwargs get the rest."""
    sig = inspect.signature(fn)
    args, kwargs, rest = [], {}, list(inputs)
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            if rest:
                args.append(rest.pop(0))
            elif p.name in named:
                kwargs[p.name] = named[p.name]
            elif p.default is p.empty:
                raise CandidateError(f"kernel_function parameter {p.name!r} matches no input and no model "
                                     f"parameter (known: {', '.join(sorted(named)) or 'none'})")
        elif p.kind == p.VAR_POSITIONAL:
            args.extend(rest)
            rest = []
        elif p.kind == p.KEYWORD_ONLY:
            if p.name in named:
                kwargs[p.name] = named[p.name]
        elif p.kind == p.VAR_KEYWORD:
            kwargs.update({k: v for k, v in named.items() if k not in kwargs and k not in sig.parameters})
    if rest:
        raise CandidateError(f"kernel_function takes {len(inputs) - len(rest)} positional inputs but the "
                             f"problem provides {len(inputs)}")
    return args, kwargs


# --------------------------------------------------------------------------------------------------
# Output poisoning: every torch.empty* allocation made while the candidate runs is filled with NaN
# (floats) or an extreme sentinel (integers), so an output element the kernel never writes can not
# pass by luck (fresh pages are zero; a reused block may hold a previous correct result).

_POISON = {"depth": 0, "originals": None}


def _poison(t):
    torch = torch_module()
    if _POISON["depth"] > 0 and torch.is_tensor(t) and t.numel():
        if t.is_floating_point() or t.is_complex():
            t.fill_(float("nan"))
        elif t.dtype != torch.bool:
            t.fill_(torch.iinfo(t.dtype).max)
    return t


def _wrap_allocator(fn):
    def allocate(*a, **k):
        return _poison(fn(*a, **k))
    allocate.__name__ = getattr(fn, "__name__", "empty")
    allocate.__doc__ = getattr(fn, "__doc__", None)
    allocate.kagent_original = fn
    return allocate


@contextlib.contextmanager
def poisoned_allocations(enabled=True):
    """While active, torch.empty/empty_like/empty_strided and Tensor.new_empty fill what they
    return. The wrappers poison only while a context is active: a candidate that bound one at import
    (`from torch import empty`) keeps a wrapper that does nothing during benchmarks."""
    torch = torch_module()
    if not enabled:
        yield
        return
    if _POISON["depth"] == 0:
        _POISON["originals"] = ({n: getattr(torch, n) for n in ("empty", "empty_like", "empty_strided")},
                                torch.Tensor.new_empty)
        for name, fn in _POISON["originals"][0].items():
            setattr(torch, name, _wrap_allocator(fn))
        torch.Tensor.new_empty = _wrap_allocator(_POISON["originals"][1])
    _POISON["depth"] += 1
    try:
        yield
    finally:
        _POISON["depth"] -= 1
        if _POISON["depth"] == 0:
            for name, fn in _POISON["originals"][0].items():
                setattr(torch, name, fn)
            torch.Tensor.new_empty = _POISON["originals"][1]


@contextlib.contextmanager
def unpoisoned():
    """Suspends allocation poisoning (inside Triton's compiler, which allocates for itself)."""
    depth, _POISON["depth"] = _POISON["depth"], 0
    try:
        yield
    finally:
        _POISON["depth"] = depth


# --------------------------------------------------------------------------------------------------
# The loaded problem.

class Problem:
    """problem.py loaded on one device: the Model, its named parameters and, unless `seed` is None,
    one input set drawn with that seed and (with `reference`) its reference output."""

    def __init__(self, path, device, dtype_name, size, seed=0, reference=True):
        torch = torch_module()
        self.path = os.path.abspath(path)
        self.dir = os.path.dirname(self.path)
        self.device = device
        self.dtype_name = dtype_name
        self.dtype = dtype_of(dtype_name)
        self.size = size
        self.seed = seed
        self.timings = {}
        self._compiled = None
        self._ref32 = None
        t0 = time.perf_counter()
        with working_directory(self.dir), blame_problem(self.path):
            self.module = import_fresh(self.path, "problem")
        self.timings["import_s"] = time.perf_counter() - t0
        name = os.path.basename(self.path)
        for needed in ("Model", "get_inputs"):
            if not hasattr(self.module, needed):
                raise ProblemError(f"{name} defines no {needed}: a kernel directory's {name} must define Model "
                                   f"(the reference nn.Module) and get_inputs() (its inputs); get_init_inputs() "
                                   f"is optional")
        with blame_problem(self.path):
            self._set_up(device, seed, reference)

    def _set_up(self, device, seed, reference):
        t0 = time.perf_counter()
        get_inputs = self.module.get_inputs
        params = inspect.signature(get_inputs).parameters
        kw = {}
        if "device" in params:
            kw["device"] = device
        if "dtype" in params:
            kw["dtype"] = self.dtype
        self._input_kw = kw
        get_init = getattr(self.module, "get_init_inputs", None)  # optional (SPEC 14 B.105)
        self.init_inputs = list(get_init()) if get_init else []
        model = self.module.Model(*self.init_inputs)
        if any(True for _ in model.parameters()):
            model = model.to(device=device, dtype=self.dtype)
        self.model = model.to(device).eval()
        self.named = named_params(self.model, self.init_inputs)
        get_config = getattr(self.module, "get_benchmark_config", None)  # optional (SPEC 3.3)
        self.benchmark_config = dict(get_config()) if get_config else {}
        self.inputs = self.inputs_for_seed(seed) if seed is not None else []
        synchronize(device)
        self.timings["inputs_s"] = time.perf_counter() - t0

        self.expected = None
        if seed is not None and reference:
            t0 = time.perf_counter()
            self.expected = self.reference(self.inputs)
            synchronize(device)
            self.timings["reference_s"] = time.perf_counter() - t0

    def inputs_for_seed(self, seed):
        """get_inputs() drawn with torch's generators seeded with `seed`, on the device, in the dtype.
        Deterministic for a device type and torch build, so two processes draw the same tensors."""
        torch = torch_module()
        torch.manual_seed(seed)
        return [self._prepare(t) for t in self.module.get_inputs(**self._input_kw)]

    def reference(self, inputs, copy=True):
        """The Model's output on copies of `inputs` (an in-place reference must not touch them);
        `copy=False` where the caller's inputs are a private copy already (a sampled call's stamped
        inputs: one clone less of every input, 2.6 ms for matvec's 4 GiB on an H100)."""
        torch = torch_module()
        with torch.no_grad():
            return self.model(*([t.clone() if torch.is_tensor(t) else t for t in inputs] if copy else inputs))

    def _prepare(self, t):
        torch = torch_module()
        if torch.is_tensor(t):
            if t.is_floating_point():
                return t.to(device=self.device, dtype=self.dtype)
            return t.to(self.device)
        return t

    def describe(self):
        torch = torch_module()
        return {"path": self.path, "device": self.device, "dtype": self.dtype_name, "size": self.size,
                "inputs": [list(t.shape) if torch.is_tensor(t) else repr(t) for t in self.inputs],
                "input_bytes": self.input_bytes(), "timings": self.timings}

    def input_bytes(self, inputs=None):
        torch = torch_module()
        return sum(t.numel() * t.element_size() for t in (inputs or self.inputs) if torch.is_tensor(t))

    def fresh_inputs(self):
        torch = torch_module()
        return [t.clone() if torch.is_tensor(t) else t for t in self.inputs]

    def reference32(self, inputs=None):
        """The reference recomputed in fp32, for an fp32 output of a 16-bit problem (SPEC 3.3)."""
        torch = torch_module()
        if inputs is None and self._ref32 is not None:
            return self._ref32
        model = self.module.Model(*self.init_inputs).to(self.device).float().eval()
        with torch.no_grad():
            ref = model(*[t.float() if torch.is_tensor(t) and t.is_floating_point() else
                          (t.clone() if torch.is_tensor(t) else t) for t in (inputs or self.inputs)])
        if inputs is None:
            self._ref32 = ref
        return ref

    def trial(self, index):
        """Inputs and reference of extra correctness trial `index`: other random values (seed + index)."""
        inputs = self.inputs_for_seed(self.seed + index)
        return inputs, self.reference(inputs)

    def compiled(self):
        torch = torch_module()
        if self._compiled is None:
            self._compiled = torch.compile(self.model)
        return self._compiled


# --------------------------------------------------------------------------------------------------
# Candidates.

class Candidate:
    def __init__(self, path, source, module, import_s):
        self.path = path
        self.source = source
        self.module = module
        self.import_s = import_s
        self.fn = getattr(module, "kernel_function", None)
        if self.fn is None or not callable(self.fn):
            raise CandidateError("the candidate does not define a callable kernel_function")


def load_candidate(path, source):
    t0 = time.perf_counter()
    with working_directory(os.path.dirname(os.path.abspath(path))), poisoned_allocations():
        try:
            module = import_fresh(path)
        except BaseException as exc:  # noqa: BLE001 - SystemExit from a candidate is a failure too
            msg, tb = describe_exception(exc)
            raise CandidateError(f"import failed: {msg}", tb, is_poisoning(tb)) from None
    return Candidate(path, source, module, time.perf_counter() - t0)


def call_candidate(problem, candidate, inputs):
    """Runs kernel_function once; returns its output (inputs[0] for an in-place kernel)."""
    args, kwargs = bind_arguments(candidate.fn, inputs, problem.named)
    out = candidate.fn(*args, **kwargs)
    return args[0] if out is None else out


def compare(problem, out, rtol, atol, expected=None, ref32=None):
    """None when `out` matches the reference (by default the cached one), else a failure message."""
    if expected is None:
        expected, ref32 = problem.expected, problem.reference32
    if isinstance(expected, (tuple, list)):
        if not isinstance(out, (tuple, list)) or len(out) != len(expected):
            return f"expected {len(expected)} outputs, got {type(out).__name__}"
        for i, (o, e) in enumerate(zip(out, expected)):
            err = compare_one(problem, o, e, rtol, atol, None)
            if err:
                return f"output {i}: {err}"
        return None
    return compare_one(problem, out, expected, rtol, atol, ref32)


def compare_one(problem, out, expected, rtol, atol, ref32):
    torch = torch_module()
    if not torch.is_tensor(out):
        return f"kernel_function returned {type(out).__name__}, expected a tensor"
    if out.device != expected.device:
        return f"output is on {out.device}, expected {expected.device}"
    if out.shape != expected.shape:
        if out.numel() == expected.numel() and out.squeeze().shape == expected.squeeze().shape:
            out = out.reshape(expected.shape)
        elif out.numel() == 1 or expected.numel() == 1:
            out, expected = out.float().mean(), expected.float().mean()  # scalar vs vector (SPEC 3.3)
        else:
            return f"shape mismatch: got {tuple(out.shape)}, expected {tuple(expected.shape)}"
    if out.dtype == torch.float32 and expected.dtype in (torch.bfloat16, torch.float16) and ref32:
        expected = ref32()
    o, e = out.float(), expected.float()
    bad = ~torch.isfinite(o) & torch.isfinite(e)
    if bad.any():
        n = int(bad.sum().item())
        return (f"output contains {n} NaN/Inf element(s) of {o.numel()} where the reference is finite "
                f"(unwritten output elements are NaN-poisoned)")
    diff = (o - e).abs()
    max_diff = float(diff.max().item()) if diff.numel() else 0.0
    if not torch.allclose(o, e, rtol=rtol, atol=atol, equal_nan=True):
        n = int((diff > atol + rtol * e.abs()).sum().item())
        return f"FAIL: max difference = {max_diff} ({n} of {o.numel()} elements outside rtol={rtol}, atol={atol})"
    return None


def verify(problem, candidate, rtol=None, atol=None, trials=1):
    """Runs the candidate on fresh copies of the inputs with poisoned allocations; returns a result dict.

    Trial 0 uses the cached inputs (run twice: the first call includes the JIT compile); trials
    1..n-1 draw new random inputs (seed + trial) with their own reference, so a kernel that only
    matches one particular input can not pass.
    """
    torch = torch_module()
    d_rtol, d_atol = default_tolerance(problem.dtype_name)
    rtol = d_rtol if rtol is None else rtol
    atol = d_atol if atol is None else atol
    timings = {"import_s": candidate.import_s}

    def run(inputs):
        with torch.no_grad(), poisoned_allocations():
            out = call_candidate(problem, candidate, inputs)
        synchronize(problem.device)
        return out

    error = None
    with working_directory(os.path.dirname(os.path.abspath(candidate.path))):
        try:
            t0 = time.perf_counter()
            run(problem.fresh_inputs())
            timings["first_call_s"] = time.perf_counter() - t0  # JIT compile + one run
            t0 = time.perf_counter()
            out = run(problem.fresh_inputs())
            timings["run_s"] = time.perf_counter() - t0
            error = compare(problem, out, rtol, atol)
            for k in range(1, max(1, int(trials))):
                if error:
                    break
                inputs, expected = problem.trial(k)
                out = run(inputs)
                err = compare(problem, out, rtol, atol, expected, lambda: problem.reference32(inputs))
                error = f"trial {k} (seed {problem.seed + k}): {err}" if err else None
                del inputs, expected, out
        except CandidateError:
            raise
        except BaseException as exc:  # noqa: BLE001
            msg, tb = describe_exception(exc)
            raise CandidateError(msg, tb, is_poisoning(tb)) from None
    return {"passed": error is None, "error": error, "rtol": rtol, "atol": atol, "trials": max(1, int(trials)),
            "timings": timings}


# --------------------------------------------------------------------------------------------------
# Timing: one method for candidate, eager and compiled reference.

def cache_bytes(device):
    torch = torch_module()
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return int(getattr(props, "L2_cache_size", 0) or 64 << 20)
    return 32 << 20


class Timer:
    """Median-of-N timing of a callable with an L2/LLC flush before every repetition.

    GPU: CUDA (HIP) events around each call, all read after one synchronize at the end.
    CPU: perf_counter around each (synchronous) call.
    """

    def __init__(self, device, flush_bytes=None):
        torch = torch_module()
        self.device = device
        self.gpu = device.startswith("cuda")
        if flush_bytes is None:
            flush_bytes = 256 << 20 if self.gpu else 32 << 20
        self.flush_buf = torch.empty(max(1, flush_bytes // 4), dtype=torch.int32, device=device)

    def flush(self):
        self.flush_buf.zero_()

    def time(self, fn, warmup, repeat):
        torch = torch_module()
        for i in range(warmup):
            fn(i)
        synchronize(self.device)
        times = []
        if self.gpu:
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
            for i in range(repeat):
                self.flush()
                starts[i].record()
                fn(i)
                ends[i].record()
            torch.cuda.synchronize()
            times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
        else:
            for i in range(repeat):
                self.flush()
                t0 = time.perf_counter()
                fn(i)
                times.append((time.perf_counter() - t0) * 1e3)
        return stats(times)


def stats(times_ms):
    ts = sorted(times_ms)
    n = len(ts)
    q = statistics.quantiles(ts, n=4) if n >= 2 else [ts[0]] * 3
    med = statistics.median(ts)
    return {"median_ms": med, "mean_ms": statistics.fmean(ts), "std_ms": statistics.pstdev(ts),
            "min_ms": ts[0], "max_ms": ts[-1], "p25_ms": q[0], "p75_ms": q[2],
            "iqr_rel": (q[2] - q[0]) / med if med > 0 else 0.0, "n": n}


def input_sets(problem, rotate_max):
    """Fresh copies of the inputs for timing: never the cached originals, which an in-place kernel
    (or an in-place reference) would corrupt for every later candidate. Several copies are rotated
    when they fit in the cache, so no repetition reads inputs a previous one left warm."""
    fits = problem.input_bytes() * 2 <= cache_bytes(problem.device)
    n = max(1, rotate_max) if fits else 1
    return [problem.fresh_inputs() for _ in range(n)]


def benchmark(problem, candidate, warmup=10, repeat=50, targets=("candidate", "eager"), flush_bytes=None,
              rotate=4, do_bench=False):
    torch = torch_module()
    timer = Timer(problem.device, flush_bytes)
    sets = input_sets(problem, rotate)
    result = {"method": "cuda_event" if timer.gpu else "perf_counter", "warmup": warmup, "repeat": repeat,
              "input_sets": len(sets), "flush_bytes": timer.flush_buf.numel() * 4, "timings": {}}
    bound = []
    if candidate is not None:
        for s in sets:
            bound.append(bind_arguments(candidate.fn, s, problem.named))
    with torch.no_grad():
        if "candidate" in targets and candidate is not None:
            with working_directory(os.path.dirname(os.path.abspath(candidate.path))):
                try:
                    result["candidate"] = timer.time(
                        lambda i: candidate.fn(*bound[i % len(bound)][0], **bound[i % len(bound)][1]),
                        warmup, repeat)
                except BaseException as exc:  # noqa: BLE001
                    msg, tb = describe_exception(exc)
                    raise CandidateError(msg, tb, is_poisoning(tb)) from None
            if do_bench:
                result["do_bench"] = triton_do_bench(lambda: candidate.fn(*bound[0][0], **bound[0][1]),
                                                     problem.device)
        if "eager" in targets:
            result["eager"] = timer.time(lambda i: problem.model(*sets[i % len(sets)]), warmup, repeat)
        if "compile" in targets:
            try:
                t0 = time.perf_counter()  # includes the first torch.compile's imports (seconds)
                compiled = problem.compiled()
                compiled(*sets[0])
                synchronize(problem.device)
                result["timings"]["compile_s"] = time.perf_counter() - t0
                result["compile"] = timer.time(lambda i: compiled(*sets[i % len(sets)]), warmup, repeat)
            except Exception as exc:  # noqa: BLE001 - an unavailable compiler is reported, not fatal
                result["compile"] = {"error": f"{type(exc).__name__}: {str(exc)[:500]}"}
    cand = result.get("candidate", {}).get("median_ms")
    for ref in ("eager", "compile"):
        ref_ms = result.get(ref, {}).get("median_ms")
        if cand and ref_ms:
            # speedup > 1 means the candidate is faster than that reference.
            result[f"speedup_vs_{ref}"] = ref_ms / cand
    return result


def triton_do_bench(fn, device):
    """triton.testing.do_bench on the same callable, for comparison only (GPU only)."""
    if not device.startswith("cuda"):
        return {"error": "do_bench needs a GPU device"}
    try:
        import triton.testing
        return {"median_ms": float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))}
    except Exception as exc:  # noqa: BLE001
        return {"error": f"{type(exc).__name__}: {str(exc)[:500]}"}


# --------------------------------------------------------------------------------------------------
# Code hash for de-duplication.

def _jit_functions(module):
    seen = []
    for value in vars(module).values():
        fn = value
        for _ in range(8):  # unwrap Autotuner / Heuristics chains
            if type(fn).__name__ in ("JITFunction",) or hasattr(fn, "device_caches"):
                break
            fn = getattr(fn, "fn", None)
            if fn is None:
                break
        if fn is not None and hasattr(fn, "device_caches") and all(fn is not s for s in seen):
            seen.append(fn)
    return seen


def compiled_asm(module):
    """(kind, [asm texts]) of every kernel the module's JIT functions compiled so far."""
    texts, kind = [], None
    for fn in _jit_functions(module):
        for cache in list(fn.device_caches.values()):
            kernels = cache[0] if isinstance(cache, tuple) else cache
            if not isinstance(kernels, dict):
                continue
            for compiled in kernels.values():
                asm = getattr(compiled, "asm", {}) or {}
                if "ptx" in asm:
                    kind = "ptx"
                    texts.append(normalize_ptx(asm["ptx"]))
                elif "amdgcn" in asm:
                    kind = "amdgcn"
                    texts.append(normalize_amdgcn(asm["amdgcn"]))
    return kind, texts


def code_hash(candidate):
    kind, texts = compiled_asm(candidate.module)
    if texts:
        return {"hash": sha256("\n\x00\n".join(sorted(texts))), "kind": kind, "kernels": len(texts)}
    return {"hash": sha256(normalize_source(candidate.source)), "kind": "source", "kernels": 0}


def release(*objs):
    """Drop references and give cached device memory back between candidates."""
    del objs
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def finite_or_none(x):
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


