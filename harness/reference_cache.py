"""PyTorch eager and torch.compile timings kept across runs (issue 14, "cache what repeats").

Every run of a kernel directory times the problem's reference twice at its start: PyTorch eager and
torch.compile (12.5 s of device time on an H100 for matvec, most of it compiling the reference). The
reference is the user's problem.py, not candidate code, and its time is a function of what ran and
where: the problem file, dtype and size, the targets and the loop (warmup, repeat, flush), the
device model and its visible index, the interpreter, torch, triton and CUDA versions, and the judge's
own timing code. The cache keys a timing by the sha256 of all of those, so a later run of the same
directory on the same kind of machine reads it instead of timing again; anything else is a miss.

Only complete, successful timings are kept; a reply built from the cache says so ("reference_cache":
{"hit": true, "stored_at", "file"}), and the run records it. The directory is written only by the
judge (the trusted side) and lies outside every candidate's writable directory when the sandbox is on.
  <dir>/<key>.json   {"version", "key_parts", "timings", "stored_at"}
"""
import hashlib
import json
import os
import platform
import sys
import tempfile
import time

VERSION = 1
HERE = os.path.dirname(os.path.abspath(__file__))
# The code that decides how a reference is timed: a change to any of it is a new key.
METHOD_FILES = ("judge.py", "harness_core.py", "reference_cache.py")


def _sha_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def device_model(device):
    torch = sys.modules.get("torch")
    if device.startswith("cuda") and torch is not None and torch.cuda.is_available():
        idx = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(idx)
        return f"{torch.cuda.get_device_name(idx)} {props.total_memory} sm{props.major}{props.minor}"
    return f"cpu {platform.machine()} {platform.processor()} {os.cpu_count()}"


def key_parts(problem_path, device, dtype, size, targets, warmup, repeat, flush_bytes):
    torch = sys.modules.get("torch")
    triton = sys.modules.get("triton")
    return {
        "version": VERSION,
        "problem": _sha_file(problem_path),
        "device": device,
        "device_model": device_model(device),
        "visible": os.environ.get("CUDA_VISIBLE_DEVICES", "") + "|" + os.environ.get("HIP_VISIBLE_DEVICES", ""),
        "dtype": dtype,
        "size": size or "",
        "targets": sorted(targets),
        "warmup": int(warmup),
        "repeat": int(repeat),
        "flush_bytes": int(flush_bytes),
        "python": sys.version,
        "executable": sys.executable,
        "torch": getattr(torch, "__version__", ""),
        "cuda": str(getattr(getattr(torch, "version", None), "cuda", "")),
        "hip": str(getattr(getattr(torch, "version", None), "hip", "")),
        "triton": getattr(triton, "__version__", ""),
        "interpret": os.environ.get("TRITON_INTERPRET", ""),
        "method": {name: _sha_file(os.path.join(HERE, name)) for name in METHOD_FILES},
    }


def key_of(parts):
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()


def complete(timings, targets):
    """True when every target has a median and none failed: only such timings are kept."""
    for t in targets:
        r = timings.get(t)
        if not isinstance(r, dict) or "error" in r or not isinstance(r.get("median_ms"), (int, float)):
            return False
        if not r["median_ms"] > 0:
            return False
    return True


def load(directory, key, targets):
    """The cached timings for `key` ({target: stats}) and the entry's stored_at, or (None, None) on a
    miss or an entry that is unreadable, of another version or incomplete."""
    if not directory:
        return None, None
    path = os.path.join(directory, key + ".json")
    try:
        with open(path, encoding="utf-8") as f:
            entry = json.load(f)
    except (OSError, ValueError):
        return None, None
    if not isinstance(entry, dict) or entry.get("version") != VERSION or not isinstance(entry.get("timings"), dict):
        return None, None
    timings = entry["timings"]
    if not complete(timings, targets):
        return None, None
    return {t: timings[t] for t in targets}, str(entry.get("stored_at", ""))


def store(directory, key, parts, timings, targets):
    """Keeps complete timings under `key`, written atomically; a failure to write is ignored (the
    cache is a convenience). Returns the file written, or None."""
    if not directory or not complete(timings, targets):
        return None
    try:
        os.makedirs(directory, exist_ok=True)
        entry = {"version": VERSION, "key_parts": parts, "timings": {t: timings[t] for t in targets},
                 "stored_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        fd, tmp = tempfile.mkstemp(prefix=".ref-", suffix=".tmp", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(entry, f, indent=1)
        path = os.path.join(directory, key + ".json")
        os.replace(tmp, path)
        return path
    except OSError:
        return None
