#!/usr/bin/env python3
"""Warm per-device evaluator server.

Started once per device by the C++ gpu worker (platform/process/evaluator_client), pinned to its GPU
through the environment it is given. The protocol runs over a dedicated file descriptor (default 3,
a socketpair end or a pipe): one JSON object per line in each direction. fds 1 and 2 belong to the
server's log; while a request runs they are redirected, at the OS level, into per-request capture
files whose tails are returned in the reply, so nothing a candidate prints can corrupt the protocol.

Requests (`op`): ping, load_problem, verify, benchmark, hash, shutdown. See docs/harness.md.
A candidate that corrupts the device context (illegal address, "CUDA error", HIP error) makes the
server reply with "poisoned": true and exit with status 3; the client restarts it.
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
import harness_core as core  # noqa: E402

POISONED_EXIT = 3


class BadRequest(Exception):
    pass


class Server:
    def __init__(self, log_dir):
        self.log_dir = log_dir
        self.problem = None
        self.problem_key = None
        self.candidates = collections.OrderedDict()  # (path, source hash) -> Candidate, LRU
        self.max_candidates = 4
        self.served = 0

    # ---- helpers --------------------------------------------------------------------------------

    def candidate_source(self, req):
        """(path, source) of the request's candidate; inline code is written to a unique file
        (Triton reads kernel source through linecache, which must never see a stale file)."""
        if req.get("path"):
            path = os.path.abspath(req["path"])
            if not os.path.isfile(path):
                raise BadRequest(f"candidate file not found: {path}")
            with open(path, encoding="utf-8") as f:
                source = f.read()
            linecache.checkcache(path)
            return path, source
        if "code" not in req:
            raise BadRequest("request needs 'code' or 'path'")
        source = req["code"]
        workdir = os.path.abspath(req.get("workdir") or os.path.join(self.log_dir, "candidates"))
        os.makedirs(workdir, exist_ok=True)
        path = os.path.join(workdir, f"kagent_candidate_{core.sha256(source)[:16]}.py")
        if not os.path.exists(path):
            with open(path, "w", encoding="utf-8") as f:
                f.write(source)
        return path, source

    def candidate(self, req):
        path, source = self.candidate_source(req)
        banned = core.ban_check(source)
        if banned:
            raise core.CandidateError(banned)
        key = (path, core.sha256(source))
        if key in self.candidates:
            self.candidates.move_to_end(key)
            cand = self.candidates[key]
            return cand, True
        cand = core.load_candidate(path, source)
        self.candidates[key] = cand
        while len(self.candidates) > self.max_candidates:
            self.candidates.popitem(last=False)
        return cand, False

    def need_problem(self):
        if self.problem is None:
            raise BadRequest("no problem loaded: send load_problem first")
        return self.problem

    # ---- operations -----------------------------------------------------------------------------

    def op_ping(self, req):
        info = {"pong": True, "pid": os.getpid(), "python": sys.version.split()[0], "served": self.served}
        torch = sys.modules.get("torch")
        if torch is not None:
            info["torch"] = torch.__version__
        if self.problem is not None:
            info["problem"] = self.problem.path
            info["device"] = self.problem.device
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
        key = (path, device, dtype, size, seed, os.path.getmtime(path))
        if key == self.problem_key and self.problem is not None:
            return dict(self.problem.describe(), cached=True)
        if device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
            if "triton" in sys.modules:
                raise BadRequest("device cpu needs TRITON_INTERPRET=1 in the evaluator's environment "
                                 "(triton is already imported without it)")
            os.environ["TRITON_INTERPRET"] = "1"
        if size:
            os.environ["KAGENT_PROBLEM_SIZE"] = str(size)
        else:
            os.environ.pop("KAGENT_PROBLEM_SIZE", None)
        self.problem = None
        self.problem_key = None
        self.candidates.clear()
        core.release()
        torch = core.torch_module()
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise BadRequest(f"device {device} requested but torch sees no GPU "
                             f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}, "
                             f"HIP_VISIBLE_DEVICES={os.environ.get('HIP_VISIBLE_DEVICES')!r})")
        self.problem = core.Problem(path, device, dtype, size, seed)
        self.problem_key = key
        return dict(self.problem.describe(), cached=False)

    def op_verify(self, req):
        problem = self.need_problem()
        cand, cached = self.candidate(req)
        result = core.verify(problem, cand, req.get("rtol"), req.get("atol"), int(req.get("trials", 1)))
        result["cached_module"] = cached
        return result

    def op_benchmark(self, req):
        problem = self.need_problem()
        targets = req.get("targets", ["candidate", "eager"])
        cand = None
        if "candidate" in targets:
            cand, _ = self.candidate(req)
        # A problem's get_benchmark_config() overrides the request (SPEC 4.1 step 1).
        warmup = int(problem.benchmark_config.get("warmup", req.get("warmup", 10)))
        repeat = int(problem.benchmark_config.get("repeat", req.get("repeat", 50)))
        return core.benchmark(problem, cand, warmup=warmup, repeat=repeat, targets=targets,
                              flush_bytes=req.get("flush_bytes"), rotate=int(req.get("rotate", 4)),
                              do_bench=bool(req.get("do_bench", False)))

    def op_hash(self, req):
        problem = self.need_problem()
        cand, _ = self.candidate(req)
        kind, texts = core.compiled_asm(cand.module)
        if not texts and os.environ.get("TRITON_INTERPRET") != "1":
            # Nothing compiled yet: one run compiles every kernel the wrapper launches.
            torch = core.torch_module()
            with core.working_directory(os.path.dirname(cand.path)), torch.no_grad():
                try:
                    core.call_candidate(problem, cand, problem.fresh_inputs())
                    core.synchronize(problem.device)
                except BaseException as exc:  # noqa: BLE001
                    msg, tb = core.describe_exception(exc)
                    raise core.CandidateError(msg, tb, core.is_poisoning(tb)) from None
        return core.code_hash(cand)

    # ---- dispatch -------------------------------------------------------------------------------

    def handle(self, req):
        """Returns (reply, exit_after)."""
        op = req.get("op")
        reply = {"id": req.get("id"), "op": op, "ok": False, "poisoned": False}
        handler = getattr(self, f"op_{op}", None) if isinstance(op, str) else None
        t0 = time.perf_counter()
        if op == "shutdown":
            reply.update(ok=True, result={})
            return reply, True
        if handler is None:
            reply.update(kind="bad_request", error=f"unknown op {op!r}")
            return reply, False
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
        except core.CandidateError as exc:
            reply.update(kind="candidate_error", error=str(exc), traceback=exc.traceback_text)
            if exc.poisoned:
                reply.update(kind="poisoned", poisoned=True)
        except BaseException as exc:  # noqa: BLE001 - the server outlives anything a request does
            tb = traceback.format_exc()
            reply.update(kind="harness_error", error=f"{type(exc).__name__}: {exc}", traceback=tb[-core.TAIL_CHARS:])
            if core.is_poisoning(tb):
                reply.update(kind="poisoned", poisoned=True)
        reply["stdout"] = capture.stdout
        reply["stderr"] = capture.stderr
        if not reply["poisoned"] and core.is_poisoning(capture.stderr) and op in ("verify", "benchmark", "hash"):
            # An asynchronous device fault may only surface in the runtime's own messages.
            reply.update(ok=False, kind="poisoned", poisoned=True,
                         error=reply.get("error") or "device error reported on stderr")
        reply["timings"] = {"total_s": time.perf_counter() - t0}
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
