#!/usr/bin/env python3
"""Warm per-device evaluator server.

Started once per device by the C++ gpu worker (platform/process/evaluator_client), pinned to its GPU
through the environment it is given. The protocol runs over a dedicated file descriptor (default 3,
a socketpair end or a pipe): one JSON object per line in each direction. fds 1 and 2 belong to the
server's log; while a request runs they are redirected, at the OS level, into per-request capture
files whose tails are returned in the reply, so nothing a candidate prints can corrupt the protocol.

Requests (`op`): ping, load_problem, verify, benchmark, hash, shutdown. See docs/harness.md.
The server is the trusted judge (harness/judge.py): candidate code runs only in single-use worker
processes it starts in the sandbox, never here. A candidate that corrupts its device context fails
alone (its worker is discarded); the server replies "poisoned" and exits with status 3 only when
its own context is hit.
"""
import argparse
import collections
import faulthandler
import json
import linecache
import os
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# torch.compile of the reference (the compile timing) runs in this process. With its default pool of
# compile subprocesses, compiler processes (gcc, collect2) could appear under the judge later, while a
# candidate runs, and be counted as processes that candidate left behind: compile in-process instead.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
import harness_core as core  # noqa: E402
import judge as judge_mod  # noqa: E402
import reference_cache  # noqa: E402

POISONED_EXIT = 3


class BadRequest(Exception):
    pass


class Server:
    """The trusted judge behind the protocol: it never imports candidate code (harness/judge.py)."""

    def __init__(self, log_dir):
        self.log_dir = log_dir
        self.judge = judge_mod.Judge(log_dir)
        self.problem_key = None
        self.hashes = collections.OrderedDict()  # source hash -> code hash, for the hash op
        self.served = 0

    # ---- helpers --------------------------------------------------------------------------------

    def candidate_source(self, req):
        if req.get("path"):
            path = os.path.abspath(req["path"])
            if not os.path.isfile(path):
                raise BadRequest(f"candidate file not found: {path}")
            with open(path, encoding="utf-8") as f:
                return f.read()
        if "code" not in req:
            raise BadRequest("request needs 'code' or 'path'")
        if not isinstance(req["code"], str):
            raise BadRequest("'code' must be a string")
        return req["code"]

    def source(self, req):
        source = self.candidate_source(req)
        banned = core.ban_check(source)
        if banned:
            raise core.CandidateError(banned)
        return source, core.sha256(source)

    def need_problem(self):
        if self.judge.problem is None:
            raise BadRequest("no problem loaded: send load_problem first")
        return self.judge.problem

    # ---- operations -----------------------------------------------------------------------------

    def op_ping(self, req):
        info = {"pong": True, "pid": os.getpid(), "python": sys.version.split()[0], "served": self.served}
        torch = sys.modules.get("torch")
        if torch is not None:
            info["torch"] = torch.__version__
        if self.judge.problem is not None:
            info["problem"] = self.judge.problem.path
            info["device"] = self.judge.problem.device
        return info

    def op_load_problem(self, req):
        path = req.get("problem") or req.get("path")
        if not path:
            raise BadRequest("load_problem needs 'problem' (a problem.py or a kernel directory)")
        path = os.path.abspath(path)
        if os.path.isdir(path):
            path = os.path.join(path, "problem.py")
        if not os.path.isfile(path):
            raise BadRequest(f"problem file not found: {path}")
        device = req.get("device", "cuda")
        dtype = req.get("dtype", "bfloat16")
        # The full example shapes are GPU-sized (4 GiB); the interpreter gets the small variant
        # unless the request says otherwise.
        size = req.get("size", "small" if device == "cpu" else None)
        seed = int(req.get("seed", 0))
        trials = int(req.get("trials", 3))
        prefix = req.get("sandbox_prefix") or []
        if not isinstance(prefix, list) or not all(isinstance(a, str) for a in prefix):
            raise BadRequest("'sandbox_prefix' must be a list of strings")
        launchers_dir = req.get("launchers_dir")
        if launchers_dir is not None and (not isinstance(launchers_dir, str) or not os.path.isabs(launchers_dir)):
            raise BadRequest("'launchers_dir' must be an absolute path")
        peak = req.get("peak_gbps")
        timeouts = {"start": float(req.get("start_timeout_s", 300)), "verify": float(req.get("verify_timeout_s", 300)),
                    "benchmark": float(req.get("benchmark_timeout_s", 300))}
        key = (path, device, dtype, size, seed, trials, tuple(prefix), peak, launchers_dir, os.path.getmtime(path))
        if key == self.problem_key and self.judge.problem is not None:
            return dict(self.judge.problem.describe(), cached=True)
        if device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
            if "triton" in sys.modules:
                raise BadRequest("device cpu needs TRITON_INTERPRET=1 in the evaluator's environment "
                                 "(triton is already imported without it)")
            os.environ["TRITON_INTERPRET"] = "1"
        if size:
            os.environ["KAGENT_PROBLEM_SIZE"] = str(size)
        else:
            os.environ.pop("KAGENT_PROBLEM_SIZE", None)
        self.problem_key = None
        self.hashes.clear()
        core.release()
        torch = core.torch_module()
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise BadRequest(f"device {device} requested but torch sees no GPU "
                             f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}, "
                             f"HIP_VISIBLE_DEVICES={os.environ.get('HIP_VISIBLE_DEVICES')!r})")
        desc = self.judge.load(path, device, dtype, size, seed, trials, prefix,
                               float(peak) if peak else None, int(req.get("samples", 3)), timeouts,
                               int(req.get("calibrate_repeat", 20)), launchers_dir=launchers_dir)
        self.problem_key = key
        return dict(desc, cached=False)

    def cached_reference_timings(self, directory, refs, warmup, repeat):
        """The judge's reference timings, or the ones a run before this one measured under the same key
        (reference_cache.py), when the request names a cache directory."""
        if directory is not None and not isinstance(directory, str):
            raise BadRequest("'reference_cache' must be a directory path")
        key = parts = None
        if directory:
            j = self.judge
            parts = reference_cache.key_parts(j.problem.path, j.device, j.dtype, j.size, refs, warmup, repeat,
                                              j.flush_bytes)
            key = reference_cache.key_of(parts)
            cached, stored_at = reference_cache.load(directory, key, refs)
            if cached is not None:
                return dict(cached, reference_cache={"hit": True, "stored_at": stored_at,
                                                     "file": os.path.join(directory, key + ".json")})
        timings = self.judge.reference_timings(refs, warmup, repeat)
        if key is not None:
            path = reference_cache.store(directory, key, parts, timings, refs)
            timings["reference_cache"] = {"hit": False, "stored": path is not None}
        return timings

    def op_verify(self, req):
        self.need_problem()
        source, key = self.source(req)
        result = self.judge.verify(source, key, req.get("rtol"), req.get("atol"))
        if result["passed"]:
            self.remember_hash(key, self.judge.code_hash(source, self.judge.current[2]))
            # The program hash with the verdict: the runtime needs it for dedup, and asking for it
            # again (op "hash") cost a round trip of 8-18 ms per verified candidate on the H200.
            result["hash"] = self.hashes[key]
        else:
            self.discard()
        return result

    def op_benchmark(self, req):
        problem = self.need_problem()
        targets = req.get("targets", ["candidate", "eager"])
        # A problem's get_benchmark_config() overrides the request (SPEC 4.1 step 1).
        warmup = int(problem.benchmark_config.get("warmup", req.get("warmup", 10)))
        repeat = int(problem.benchmark_config.get("repeat", req.get("repeat", 50)))
        result = {}
        if "candidate" in targets:
            source, key = self.source(req)
            result = self.judge.benchmark(source, key, warmup, repeat, req.get("rtol"), req.get("atol"))
            if key not in self.hashes:
                self.remember_hash(key, self.judge.code_hash(source, {}))
            result["hash"] = self.hashes[key]
            self.tails = result.pop("_tails", ("", ""))
        refs = [t for t in targets if t in ("eager", "compile")]
        if refs:
            timings = self.cached_reference_timings(req.get("reference_cache"), refs, warmup, repeat)
            if "compile_s" in timings:
                result.setdefault("timings", {})["compile_s"] = timings.pop("compile_s")
            result.update(timings)
        result.setdefault("method", "cuda_event" if problem.device.startswith("cuda") else "perf_counter")
        result.setdefault("warmup", warmup)
        result.setdefault("repeat", repeat)
        cand = result.get("candidate", {}).get("median_ms")
        for ref in ("eager", "compile"):
            ref_ms = result.get(ref, {}).get("median_ms")
            if cand and ref_ms:
                result[f"speedup_vs_{ref}"] = ref_ms / cand
        return result

    def op_hash(self, req):
        self.need_problem()
        source, key = self.source(req)
        if key in self.hashes:
            return self.hashes[key]
        result = self.judge.verify(source, key, req.get("rtol"), req.get("atol"))
        if not result["passed"]:
            self.discard()
            raise core.CandidateError(f"the candidate does not verify: {result['error']}")
        h = self.judge.code_hash(source, self.judge.current[2])
        self.remember_hash(key, h)
        return h

    def remember_hash(self, key, h):
        self.hashes[key] = h
        while len(self.hashes) > 64:
            self.hashes.popitem(last=False)

    def discard(self):
        self.tails = self.judge.finish_current()

    # ---- dispatch -------------------------------------------------------------------------------

    def handle(self, req):
        """Returns (reply, exit_after)."""
        op = req.get("op")
        reply = {"id": req.get("id"), "op": op, "ok": False, "poisoned": False}
        handler = getattr(self, f"op_{op}", None) if isinstance(op, str) else None
        t0 = time.perf_counter()
        if op == "shutdown":
            self.judge.shutdown_workers()
            reply.update(ok=True, result={})
            return reply, True
        if handler is None:
            reply.update(kind="bad_request", error=f"unknown op {op!r}")
            return reply, False
        self.tails = None
        capture = core.Capture(self.log_dir)
        try:
            with capture:
                result = handler(req)
            reply["result"] = result
            if op == "verify" and not result["passed"]:
                reply.update(kind="mismatch", error=result["error"])
            else:
                reply["ok"] = True
        except BadRequest as exc:
            reply.update(kind="bad_request", error=str(exc))
        except judge_mod.IntegrityError as exc:
            self.discard()
            reply.update(kind="integrity", error=f"integrity: {exc}")
        except judge_mod.WorkerGone as exc:
            self.discard()
            kind = {"timeout": "timeout", "integrity": "integrity", "harness": "harness_error"}.get(exc.kind, "crashed")
            reply.update(kind=kind, error=str(exc) if kind != "integrity" else f"integrity: {exc}")
        except core.ProblemError as exc:
            reply.update(kind="problem_error", error=str(exc), traceback=exc.traceback_text)
        except core.CandidateError as exc:
            self.discard()
            reply.update(kind="candidate_error", error=str(exc), traceback=exc.traceback_text)
            if exc.poisoned:
                reply.update(kind="candidate_poisoned")
        except BaseException as exc:  # noqa: BLE001 - the server outlives anything a request does
            tb = traceback.format_exc()
            self.discard()
            reply.update(kind="harness_error", error=f"{type(exc).__name__}: {exc}", traceback=tb[-core.TAIL_CHARS:])
            if core.is_poisoning(tb):
                reply.update(kind="poisoned", poisoned=True)
        if self.tails is None and self.judge.current is not None:
            self.tails = self.judge.current[1].tails()
        out, err = self.tails if self.tails else (capture.stdout, capture.stderr)
        if self.tails and (capture.stdout or capture.stderr):
            out, err = capture.stdout + out, capture.stderr + err
        reply["stdout"] = out[-core.TAIL_CHARS:]
        reply["stderr"] = err[-core.TAIL_CHARS:]
        reply["timings"] = {"total_s": time.perf_counter() - t0}
        self.judge.idle()
        self.served += 1
        return reply, reply["poisoned"]


def serve(fd_in, fd_out, log_dir):
    # Private, non-inheritable copies: processes a candidate spawns must not hold the protocol open.
    rfd, wfd = os.dup(fd_in), os.dup(fd_out)
    for fd in {fd_in, fd_out}:
        os.close(fd)
    server = Server(log_dir)
    buf = b""

    def send(obj):
        data = (json.dumps(obj, default=str) + "\n").encode()
        while data:
            n = os.write(wfd, data)
            data = data[n:]

    while True:
        while b"\n" not in buf:
            chunk = os.read(rfd, 1 << 16)
            if not chunk:
                return 0  # the client went away
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise ValueError("a request must be a JSON object")
        except ValueError as exc:
            send({"id": None, "ok": False, "kind": "bad_request", "error": f"protocol: {exc}"})
            continue
        reply, stop = server.handle(req)
        try:
            send(reply)
        except OSError:
            return 0
        if stop:
            return POISONED_EXIT if reply.get("poisoned") else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fd", type=int, default=3, help="protocol fd for both directions (socketpair)")
    ap.add_argument("--fd-in", type=int, help="protocol input fd (pipe), overrides --fd")
    ap.add_argument("--fd-out", type=int, help="protocol output fd (pipe), overrides --fd")
    ap.add_argument("--log-dir", help="directory for per-request capture files (default: a temp dir)")
    args = ap.parse_args(argv)
    log_dir = os.path.abspath(args.log_dir or tempfile.mkdtemp(prefix="kagent-evaluator-"))
    os.makedirs(log_dir, exist_ok=True)
    # A segfaulting candidate leaves a Python traceback in the request's stderr capture file.
    faulthandler.enable(file=sys.stderr, all_threads=False)
    fd_in = args.fd if args.fd_in is None else args.fd_in
    fd_out = args.fd if args.fd_out is None else args.fd_out
    return serve(fd_in, fd_out, log_dir)


if __name__ == "__main__":
    sys.exit(main())
