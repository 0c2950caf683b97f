"""Triton launchers shared between single-use candidate processes, without trusting any of them.

Triton builds a small C module (the "launcher") for every kernel signature it launches, and keys it
by the SHA-256 of the C source it generated. Each candidate process has an empty cache of its own,
so every candidate paid for that build again (0.17 s of a 0.38 s cold first call, measured on the
H200). Sharing a writable cache would let one candidate plant a module that a later one loads.

Here the shared directory is read-only for candidates (it lies outside the sandbox's one writable
directory) and is written only by the judge, with modules built by a separate builder process that
runs under the same sandbox as a candidate. A candidate process (worker side) looks a launcher up by
the key its own, not yet patched, Triton computed from the source it generated; so it only ever loads
the build of exactly the source it would have compiled itself. What a candidate reports (the sources
it compiled) is data for the builder; a forged source can only produce a module that no honest
process asks for, built with no more rights than the candidate had.

Only used on NVIDIA hosts under bwrap (elsewhere the directory would not be read-only)."""
import glob
import hashlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import threading

MAX_SOURCES = 8          # launcher sources one candidate may hand over
MAX_SOURCE_BYTES = 1 << 20
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def _key(build, src):
    return hashlib.sha256((src + build.platform_key()).encode("utf-8")).hexdigest()


class SharedLookup:
    """Worker side: Triton's compile_module_from_src, first looking in the shared directory."""

    def __init__(self, directory):
        self.directory = directory
        self.compiled = []
        self.hits = 0
        import triton.runtime.build as build
        original = build.compile_module_from_src
        load = getattr(build, "_load_module_from_path", None)
        if load is None or not hasattr(build, "platform_key"):
            raise RuntimeError("this Triton has no _load_module_from_path/platform_key")
        lookup = self

        def shared(src, name, *a, **k):
            path = os.path.join(lookup.directory, _key(build, src), name + SUFFIX)
            if os.path.isfile(path):
                try:
                    mod = load(name, path)
                    lookup.hits += 1
                    return mod
                except (RuntimeError, ImportError):
                    pass
            mod = original(src, name, *a, **k)
            if len(lookup.compiled) < MAX_SOURCES and len(src) <= MAX_SOURCE_BYTES:
                lookup.compiled.append({"name": name, "src": src})
            return mod

        shared.kagent_original = original
        for modname in ("triton.runtime.build", "triton.backends.nvidia.driver"):
            try:
                m = importlib.import_module(modname)
            except Exception:  # noqa: BLE001 - a backend this host does not have
                continue
            if getattr(m, "compile_module_from_src", None) is original:
                m.compile_module_from_src = shared

    def take(self):
        out, self.compiled = self.compiled, []
        return out


# The builder: a fresh interpreter under the candidates' sandbox, writable directory = its own.
BUILDER = r"""
import json, os, sys
job = json.load(open(sys.argv[1]))
os.environ["TRITON_CACHE_DIR"] = sys.argv[2]
from triton.runtime.build import compile_module_from_src
from triton.backends.nvidia import driver
compile_module_from_src(job["src"], job["name"], library_dirs=driver.library_dirs(),
                        include_dirs=driver.include_dirs, libraries=driver.libraries)
"""


class LauncherCache:
    """Judge side: the shared directory and a background builder for the sources workers report."""

    def __init__(self, shared, prefix, python=None, env=None):
        """`shared`: the directory the workers read (the runtime names it: workers/gpu<N>/launchers/shared);
        builds happen beside it, in its parent's build/, which no worker sees."""
        import triton.runtime.build as build
        self.build = build
        self.dir = os.path.abspath(shared)
        self.root = os.path.dirname(self.dir)
        self.work = os.path.join(self.root, "build")
        os.makedirs(self.dir, exist_ok=True)
        os.makedirs(self.work, exist_ok=True)
        self.prefix = list(prefix)
        self.python = python or sys.executable
        self.env = env
        self.pending = set()
        self.built = 0
        self.failed = 0
        self.lock = threading.Lock()
        self.running = set()
        self.gave_up = set()   # sources whose build failed once: not retried

    def live_pids(self):
        """The builder processes now running (started by the judge, not by any candidate)."""
        with self.lock:
            return set(self.running)

    def has(self, key, name):
        return os.path.isfile(os.path.join(self.dir, key, name + SUFFIX))

    def offer(self, sources):
        """Queues a build for each reported source not yet shared (bounded, never blocks)."""
        if not isinstance(sources, list):
            return
        for job in sources[:MAX_SOURCES]:
            if not isinstance(job, dict):
                continue
            name, src = job.get("name"), job.get("src")
            if not isinstance(name, str) or not isinstance(src, str) or len(src) > MAX_SOURCE_BYTES:
                continue
            if not name.replace("_", "").isalnum():
                continue
            key = _key(self.build, src)
            with self.lock:
                if key in self.pending or key in self.gave_up or self.has(key, name):
                    continue
                self.pending.add(key)
            threading.Thread(target=self._build, args=(key, name, src), daemon=True).start()

    def _build(self, key, name, src):
        work = os.path.join(self.work, key)
        try:
            shutil.rmtree(work, ignore_errors=True)
            os.makedirs(work)
            job = os.path.join(work, "job.json")
            with open(job, "w", encoding="utf-8") as f:
                json.dump({"name": name, "src": src}, f)
            cache = os.path.join(work, "cache")
            argv = [a.replace("{scratch}", work) for a in self.prefix]
            argv += [self.python, "-c", BUILDER, job, cache]
            log = open(os.path.join(self.root, "build.log"), "ab")
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=self.env,
                                        cwd=work)
                with self.lock:
                    self.running.add(proc.pid)
                try:
                    proc.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                finally:
                    with self.lock:
                        self.running.discard(proc.pid)
            finally:
                log.close()
            # Triton files it under its own (base32) form of the key: the one module of that name.
            found = glob.glob(os.path.join(cache, "*", name + SUFFIX))
            if len(found) != 1:
                self.failed += 1
                self.gave_up.add(key)
                return
            built = found[0]
            dest = os.path.join(self.dir, key)
            tmp = dest + ".tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            os.makedirs(tmp)
            shutil.copyfile(built, os.path.join(tmp, name + SUFFIX))
            os.chmod(os.path.join(tmp, name + SUFFIX), 0o555)
            try:
                os.rename(tmp, dest)
                self.built += 1
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
        except Exception:  # noqa: BLE001 - a failed build only means no sharing for that source
            self.failed += 1
            self.gave_up.add(key)
        finally:
            shutil.rmtree(work, ignore_errors=True)
            with self.lock:
                self.pending.discard(key)


def _probe_kernel():
    """A harness-owned kernel for warming Triton's compiler up before any candidate exists."""
    import triton
    import triton.language as tl

    def kagent_standby_probe(ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(ptr + offs, tl.load(ptr + offs, mask=offs < n, other=0) + 1, mask=offs < n)

    return triton.jit(kagent_standby_probe)


def _device_capability():
    """The compute capability (e.g. 90) of the first visible device, from NVML: no CUDA call at all
    (a CUDA driver initialised in this process would keep a test.py that forks from using CUDA in
    its children, and torch's own queries created a context: 518 MiB on an H100). Falls back to 80
    (the probe only warms the compiler up; its binary is never used)."""
    import ctypes
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if nvml.nvmlInit_v2() != 0:
            return 80
        try:
            handle = ctypes.c_void_p()
            first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
            if first.startswith(("GPU-", "MIG-")):
                rc = nvml.nvmlDeviceGetHandleByUUID(first.encode(), ctypes.byref(handle))
            else:
                rc = nvml.nvmlDeviceGetHandleByIndex_v2(int(first) if first.isdigit() else 0, ctypes.byref(handle))
            major, minor = ctypes.c_int(), ctypes.c_int()
            if rc != 0 or nvml.nvmlDeviceGetCudaComputeCapability(handle, ctypes.byref(major), ctypes.byref(minor)) != 0:
                return 80
            return major.value * 10 + minor.value
        finally:
            nvml.nvmlShutdown()
    except (OSError, AttributeError, ValueError):
        return 80


PREPARED = {}  # what prepare_triton did, for diagnostics: lookup, utils, probe (True or the error)


def prepare_triton(directory=None, compile_probe=False):
    """What a process started ahead of its kernel (test.py's standby, the profiler's) does for Triton
    while it waits, so that the kernel's first call pays only for its own compile:

    - with `directory` (the judge's shared launcher directory, read-only in this sandbox), launchers
      are looked up there first, as a worker does (SharedLookup: only the build of the very source
      this process generated is ever loaded);
    - the driver's C utilities are built or loaded (`CudaUtils`), host-side;
    - with `compile_probe`, a harness kernel is compiled for the capability NVML reports and never
      loaded nor launched, so that the compiler's own start-up (its modules, LLVM, ptxas) is paid
      here.

    CUDA is not even initialised (a compile through Triton's JIT created a context: 518 MiB in each
    waiting test.py standby on an H100; and a CUDA initialised before test.py would keep a test that
    forks from using CUDA in its children). Each step is best-effort (the cpu platform's interpreter
    has no driver): a failure only leaves that cost to the kernel's first call.
    KAGENT_STANDBY_PREPARE=0 skips all of it (the standbys as they were: for measuring this).
    Returns the SharedLookup, or None."""
    PREPARED.clear()
    if os.environ.get("KAGENT_STANDBY_PREPARE") == "0":
        return None
    lookup = None
    if directory:
        try:
            lookup = SharedLookup(directory)
        except Exception:  # noqa: BLE001 - no sharing: the launcher is built here, as before
            lookup = None
    PREPARED["lookup"] = lookup is not None
    if os.environ.get("TRITON_INTERPRET") == "1":
        return lookup
    import torch
    if torch.version.cuda is None or getattr(torch.version, "hip", None):
        return lookup  # the launcher sharing and these preparations are NVIDIA's
    try:
        # The utilities themselves, not triton's driver.active: choosing the active driver asks
        # torch.cuda.is_available(), which initialises CUDA in this process.
        from triton.backends.nvidia.driver import CudaUtils
        CudaUtils()
        PREPARED["utils"] = True
    except Exception as exc:  # noqa: BLE001
        PREPARED["utils"] = repr(exc)[:200]
    if compile_probe:
        try:
            import triton
            from triton.backends.compiler import GPUTarget
            from triton.compiler import ASTSource
            src = ASTSource(_probe_kernel(), {"ptr": "*i32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 1024})
            triton.compile(src, target=GPUTarget("cuda", _device_capability(), 32))
            PREPARED["probe"] = True
        except Exception as exc:  # noqa: BLE001
            PREPARED["probe"] = repr(exc)[:200]
    return lookup
