"""The evaluator server over its socket protocol, and run_once.py, as separate processes."""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import unittest

import support

EVALUATOR = os.path.join(support.HARNESS, "evaluator.py")
RUN_ONCE = os.path.join(support.HARNESS, "run_once.py")


class ServerProcess:
    def __init__(self, log_dir, extra_env=None):
        ours, theirs = socket.socketpair()
        env = dict(os.environ, TRITON_INTERPRET="1", **(extra_env or {}))
        self.proc = subprocess.Popen([sys.executable, EVALUATOR, "--fd", str(theirs.fileno()), "--log-dir", log_dir],
                                     pass_fds=[theirs.fileno()], env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, start_new_session=True)
        theirs.close()
        self.sock = ours
        self.sock.settimeout(120)
        self.file = ours.makefile("rwb")
        self.next_id = 0

    def send_raw(self, line):
        self.file.write(line)
        self.file.flush()
        reply = self.file.readline()
        return json.loads(reply) if reply else None

    def request(self, **req):
        self.next_id += 1
        req["id"] = self.next_id
        reply = self.send_raw((json.dumps(req) + "\n").encode())
        if reply is not None:
            assert reply["id"] == self.next_id, reply
        return reply

    def close(self):
        self.file.close()
        self.sock.close()
        try:
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            self.proc.stderr.close()


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class ServerCase(unittest.TestCase):
    """One evaluator server per test, its log directory a temporary one."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.server = ServerProcess(self.tmp.name)

    def tearDown(self):
        self.server.close()
        self.tmp.cleanup()

    def load_matvec(self):
        reply = self.server.request(op="load_problem", problem=support.MATVEC, device="cpu", size="small")
        self.assertTrue(reply["ok"], reply)
        return reply


class Server(ServerCase):
    def test_session_verify_errors_and_poisoning(self):
        s = self.server
        pong = s.request(op="ping")
        self.assertTrue(pong["ok"] and pong["result"]["pong"])
        bad = s.send_raw(b"this is not json\n")
        self.assertEqual((bad["ok"], bad["kind"]), (False, "bad_request"))
        self.assertIn("protocol", bad["error"])
        self.assertEqual(s.request(op="verify", path="/nonexistent.py")["kind"], "bad_request")
        self.assertFalse(self.load_matvec()["result"]["cached"])
        self.assertTrue(self.load_matvec()["result"]["cached"])  # inputs are built once

        ok = s.request(op="verify", path=os.path.join(support.MATVEC, "input.py"))
        self.assertTrue(ok["ok"], ok)
        self.assertTrue(ok["result"]["passed"])

        chatty = s.request(op="verify", code=support.read(os.path.join(support.MATVEC, "input.py")).replace(
                           "def kernel_function(A, B):\n",
                           "def kernel_function(A, B):\n"
                           "    import sys, os\n"
                           "    print('to stdout')\n"
                           "    os.write(1, b'raw fd 1\\n')\n"
                           "    print('to stderr', file=sys.stderr)\n"))
        self.assertTrue(chatty["ok"], chatty)
        self.assertIn("to stdout", chatty["stdout"])
        self.assertIn("raw fd 1", chatty["stdout"])
        self.assertIn("to stderr", chatty["stderr"])

        banned = s.request(op="verify", code="import torch\ndef kernel_function(A, B):\n    return torch.matmul(A, B)\n")
        self.assertFalse(banned["ok"])
        self.assertTrue(banned["error"].startswith("Disallowed PyTorch usage detected: "), banned["error"])

        # No Triton launch at all: rejected as a cheat before its values are even looked at.
        wrong = s.request(op="verify", code="def kernel_function(A, B):\n    return A[:, :1] * 0\n")
        self.assertEqual(wrong["kind"], "integrity")
        self.assertIn("torch compute op aten::mul", wrong["error"])
        zeros = s.request(op="verify", code=support.read(os.path.join(support.ROOT, "tests", "cheats", "matvec",
                                                                       "zeros.py")))
        self.assertEqual(zeros["kind"], "mismatch")
        self.assertIn("constant", zeros["error"])

        raised = s.request(op="verify", code="def kernel_function(A, B):\n    raise KeyError('nope')\n")
        self.assertEqual(raised["kind"], "candidate_error")
        self.assertIn("KeyError", raised["error"])

        bench = s.request(op="benchmark", path=os.path.join(support.MATVEC, "input.py"), warmup=1, repeat=2,
                          flush_bytes=1 << 20)
        self.assertTrue(bench["ok"], bench)
        self.assertEqual(bench["result"]["candidate"]["n"], 2)
        self.assertIn("speedup_vs_eager", bench["result"])
        h = s.request(op="hash", path=os.path.join(support.MATVEC, "input.py"))
        self.assertEqual(h["ok"], True)
        self.assertTrue(h["result"]["kind"].startswith("source"), h)

        self.assertTrue(s.request(op="ping")["ok"])  # still alive after all of that
        poisoned = s.request(op="verify", code="def kernel_function(A, B):\n    raise RuntimeError("
                             "'CUDA error: an illegal memory access was encountered')\n")
        # A device fault is the candidate's own process's: the judge's context is untouched.
        self.assertFalse(poisoned["poisoned"])
        self.assertEqual(poisoned["kind"], "candidate_poisoned")
        self.assertTrue(s.request(op="ping")["ok"])

    def test_segfaulting_candidate_kills_only_its_own_process(self):
        self.load_matvec()
        reply = self.server.request(op="verify", code="import ctypes\ndef kernel_function(A, B):\n"
                                    "    return ctypes.string_at(0)\n")
        self.assertEqual(reply["kind"], "crashed", reply)
        self.assertIn("signal 11", reply["error"])
        self.assertIn("Segmentation fault", reply["stderr"])
        ok = self.server.request(op="verify", path=os.path.join(support.MATVEC, "input.py"))
        self.assertTrue(ok["ok"], ok)

    def test_shutdown(self):
        self.assertTrue(self.server.request(op="shutdown")["ok"])
        self.assertEqual(self.server.proc.wait(timeout=30), 0)


class ReferenceCache(ServerCase):
    """PyTorch eager's timing kept across runs (reference_cache.py): the second server reads what the
    first one timed, under the same key only; what is incomplete or of another version is timed again."""

    def bench_eager(self, server, cache, repeat=2):
        return server.request(op="benchmark", targets=["eager"], warmup=1, repeat=repeat, reference_cache=cache)

    def test_a_second_run_reads_the_timing_and_anything_else_times_again(self):
        cache = os.path.join(self.tmp.name, "references")
        self.load_matvec()
        first = self.bench_eager(self.server, cache)
        self.assertTrue(first["ok"], first)
        self.assertEqual(first["result"]["reference_cache"], {"hit": False, "stored": True})
        files = os.listdir(cache)
        self.assertEqual(len(files), 1, files)
        entry = read_json(os.path.join(cache, files[0]))
        self.assertEqual(entry["key_parts"]["targets"], ["eager"])
        self.assertEqual(entry["key_parts"]["repeat"], 2)

        # Another server process (another run) with the same problem, loop and machine: read, not timed.
        other = ServerProcess(os.path.join(self.tmp.name, "other"))
        try:
            self.assertTrue(other.request(op="load_problem", problem=support.MATVEC, device="cpu", size="small")["ok"])
            again = self.bench_eager(other, cache)
            self.assertTrue(again["ok"], again)
            self.assertTrue(again["result"]["reference_cache"]["hit"])
            self.assertEqual(again["result"]["reference_cache"]["stored_at"], entry["stored_at"])
            self.assertEqual(again["result"]["eager"], first["result"]["eager"])
            # Another loop is another key: timed, and kept beside the first.
            longer = self.bench_eager(other, cache, repeat=3)
            self.assertFalse(longer["result"]["reference_cache"]["hit"])
            self.assertEqual(longer["result"]["eager"]["n"], 3)
            self.assertEqual(len(os.listdir(cache)), 2)
            # An entry whose timing is incomplete (or of another version) is a miss, timed and replaced.
            path = os.path.join(cache, files[0])
            entry["timings"]["eager"] = {"error": "planted"}
            with open(path, "w") as f:
                json.dump(entry, f)
            redo = self.bench_eager(other, cache)
            self.assertFalse(redo["result"]["reference_cache"]["hit"])
            self.assertGreater(redo["result"]["eager"]["median_ms"], 0)
            self.assertIn("median_ms", read_json(path)["timings"]["eager"])
            bad = other.request(op="benchmark", targets=["eager"], warmup=1, repeat=2, reference_cache=7)
            self.assertEqual(bad["kind"], "bad_request")
            self.assertIn("reference_cache", bad["error"])
        finally:
            other.close()
        # No cache asked: nothing said about one.
        plain = self.server.request(op="benchmark", targets=["eager"], warmup=1, repeat=2)
        self.assertNotIn("reference_cache", plain["result"])

    def test_the_key_changes_with_the_problem_and_the_method(self):
        import reference_cache as rc
        base = rc.key_parts(os.path.join(support.MATVEC, "problem.py"), "cpu", "bfloat16", "small", ["eager"], 1, 2, 1)
        other_problem = rc.key_parts(os.path.join(support.RMSNORM, "problem.py"), "cpu", "bfloat16", "small",
                                     ["eager"], 1, 2, 1)
        other_dtype = rc.key_parts(os.path.join(support.MATVEC, "problem.py"), "cpu", "float32", "small", ["eager"],
                                   1, 2, 1)
        keys = {rc.key_of(k) for k in (base, other_problem, other_dtype)}
        self.assertEqual(len(keys), 3)
        self.assertEqual(set(base["method"]), {"judge.py", "harness_core.py", "reference_cache.py"})
        self.assertFalse(rc.complete({"eager": {"median_ms": 0.0}}, ["eager"]))
        self.assertFalse(rc.complete({"eager": {"median_ms": 1.0}}, ["eager", "compile"]))
        self.assertTrue(rc.complete({"eager": {"median_ms": 1.0}}, ["eager"]))
        self.assertIsNone(rc.store(os.path.join(self.tmp.name, "c"), "k", base, {"eager": {"error": "x"}}, ["eager"]))
        self.assertEqual(rc.load(os.path.join(self.tmp.name, "c"), "k", ["eager"]), (None, None))


class RunOnce(unittest.TestCase):
    def run_once(self, *args):
        proc = subprocess.run([sys.executable, RUN_ONCE, "--problem", support.MATVEC, "--device", "cpu",
                               "--size", "small", *args], capture_output=True, text=True, timeout=300)
        return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1])

    def test_cold_verify_and_benchmark(self):
        rc, reply = self.run_once("--kernel", os.path.join(support.MATVEC, "input.py"), "--warmup", "1",
                                  "--repeat", "2", "--cold")
        self.assertEqual(rc, 0, reply)
        self.assertTrue(reply["result"]["verify"]["passed"])
        self.assertEqual(reply["result"]["benchmark"]["candidate"]["n"], 2)
        for key in ("import_torch_triton_s", "load_problem_s", "verify_s", "benchmark_s"):
            self.assertIn(key, reply["cold"])

    def test_failing_candidate_exits_1(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = support.write(tmp, "kernel.py", support.read(os.path.join(support.ROOT, "tests", "cheats",
                                                                             "matvec", "zeros.py")))
            rc, reply = self.run_once("--kernel", path, "--mode", "verify")
        self.assertEqual(rc, 1)
        self.assertEqual(reply["kind"], "mismatch")


if __name__ == "__main__":
    unittest.main()
