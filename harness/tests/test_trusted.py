"""The trusted evaluation against its attackers: every kernel of tests/cheats/matvec through the
evaluator server on the CPU platform (verify, then benchmark, as the runtime sends them), plus the
defences that need a set-up of their own (physics floor, isolation between candidates, the wall
clock bound, the dedup hash)."""
import contextlib
import math
import os
import re
import tempfile
import unittest

import support
from test_server import ServerProcess

import judge

CHEATS = os.path.join(support.ROOT, "tests", "cheats", "matvec")
START = os.path.join(support.MATVEC, "input.py")


def expectation(path):
    with open(path, encoding="utf-8") as f:
        m = re.search(r"^# expect: (\w+)", f.read(), re.M)
    return m.group(1) if m else "any"


def evaluate(server, code, warmup=5, repeat=8):
    """(verdict, reply): verdict is verified, banned, mismatch, integrity, error; as the runtime would
    see it."""
    v = server.request(op="verify", code=code)
    if not v["ok"] and str(v.get("error", "")).startswith("Disallowed PyTorch usage detected"):
        return "banned", v
    if not v["ok"]:
        return ("integrity" if v.get("kind") == "integrity" else "mismatch" if v.get("kind") == "mismatch"
                else "error"), v
    b = server.request(op="benchmark", code=code, targets=["candidate"], warmup=warmup, repeat=repeat)
    if not b["ok"]:
        return ("integrity" if b.get("kind") == "integrity" else "error"), b
    return "verified", b


class Trusted(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.server = ServerProcess(cls.tmp.name)
        reply = cls.server.request(op="load_problem", problem=support.MATVEC, device="cpu", size="small",
                                   trials=3, samples=3, calibrate_repeat=8)
        assert reply["ok"], reply
        cls.loaded = reply["result"]

    @classmethod
    def tearDownClass(cls):
        cls.server.request(op="shutdown")
        cls.server.close()
        cls.tmp.cleanup()

    def test_every_cheat_is_rejected_and_every_control_verified(self):
        seen = {}
        for name in sorted(os.listdir(CHEATS)):
            path = os.path.join(CHEATS, name)
            with open(path, encoding="utf-8") as f:
                code = f.read()
            verdict, reply = evaluate(self.server, code)
            want = expectation(path)
            seen[name] = (verdict, reply.get("error"))
            with self.subTest(cheat=name):
                if want == "verified":
                    self.assertEqual(verdict, "verified", reply.get("error"))
                elif want == "rejected":
                    self.assertIn(verdict, ("mismatch", "integrity"), reply.get("error"))
                elif want != "any":
                    self.assertEqual(verdict, want, reply.get("error"))
                if want != "verified" and want != "any":
                    self.assertNotEqual(verdict, "verified")
        # The reasons name what was seen.
        self.assertIn("patched timer", seen["slow_clock.py"][1])
        # The deep one leaves the public names alone and rebinds the worker's own timers: seen there.
        # (Seen by the snapshot of harness code after its verification call, or as a patched timer.)
        self.assertRegex(seen["slow_clock_deep.py"][1],
                         r"patched timer \(worker._perf_counter|patched harness code \(worker._perf_counter")
        # A thread started with _thread (nothing in `threading` counts it), computing between the calls:
        # counted by the judge from /proc at the end of each timed call, and its ops recorded (the
        # recorder records every thread) wherever one ran during a verification call.
        self.assertRegex(seen["work_beside_the_loop.py"][1],
                         r"a thread of the candidate ran beside its timed calls|torch compute op aten::(mm|matmul)")
        # PyTorch's product in a thread started and joined inside each call: its ops are recorded too.
        self.assertRegex(seen["torch_in_a_thread.py"][1], r"torch compute op aten::(mm|matmul) in the candidate's call")
        # PyTorch's product in a child forked inside each call: no fork once the candidate is loaded.
        self.assertIn("the candidate tried to fork its process (os.fork: refused", seen["fork_in_the_call.py"][1])
        # The recorder's own method rebound so that a timed call has no ops.
        self.assertIn("patched harness code (worker.OpRecorder._marked_ops", seen["patched_recorder.py"][1])
        # An end mark and a call mark of its own around PyTorch's product in each timed call.
        self.assertIn("the op recorder's marks of the timed loop's calls do not pair up", seen["forged_end_mark.py"][1])
        # A helper process that the last timed call ends: seen at the end of an earlier one.
        # (Its fork is now refused first: no fork once the candidate is loaded.)
        self.assertRegex(seen["process_beside_the_loop.py"][1],
                         r"process\(es\) of the candidate ran beside its timed calls|the candidate tried to fork its process")
        # A profile hook that computes in the loop's own thread once the stamp has landed.
        # (Or its PyTorch ops, where the recorder of a verification call, which records every thread,
        # was still on when the hook ran.)
        if "torch compute op" not in seen["hook_in_the_loop.py"][1]:
            self.assertIn("a hook of the candidate runs its code in the timed loop", seen["hook_in_the_loop.py"][1])
            self.assertIn("sys.setprofile", seen["hook_in_the_loop.py"][1])
        # An audit hook (which cannot be listed or removed) computing on the loop's own audited events:
        # refused when it is added, and the try is the evidence.
        self.assertIn("sys.addaudithook (hooks refused)", seen["audit_in_the_loop.py"][1])
        # Every timed call's answer computed ahead from the stamps, read in a warm-up call: the worker now
        # holds only the current call's stamp, and the stale answers fail the sampled checks.
        self.assertIn("output of a timed call differs from the reference for its inputs", seen["future_stamps.py"][1])
        # PyTorch's product only in the timed calls: they run under the op recorder too.
        self.assertRegex(seen["unwatched_torch.py"][1], r"torch compute op aten::(mm|matmul) in the candidate's call \(a call of the timed loop\)")
        # PyTorch's product in the warm-up calls that run unwatched, returned by every later call: what a
        # warm-up computes cannot serve a timed call, whose inputs are stamped afresh.
        self.assertIn("output of a timed call differs from the reference for its inputs", seen["torch_in_the_warmup.py"][1])
        # The worker's list of allowed ops widened: the judge decides with its own list.
        self.assertRegex(seen["allowlist_rebound.py"][1], r"torch compute op aten::(mm|matmul) in the candidate's call")
        # The recorder's reporting methods given other code (the function objects stay the same): their
        # code, defaults and closures are in the snapshot of harness code, compared after every call.
        self.assertRegex(seen["swapped_code.py"][1], r"patched harness code \((\S+, )*worker\.OpRecorder\.seen changed")
        # The flag that refuses forks set back to False: data the snapshot holds too.
        self.assertIn("patched harness code (worker._forks_forbidden changed", seen["forks_unforbidden.py"][1])
        # Its answers computed in the loop's stamping (a rebound torch.Tensor.copy_), outside the calls.
        self.assertIn("patched harness code (torch.Tensor.copy_", seen["work_in_the_stamp.py"][1])
        self.assertRegex(seen["torch_op_obfuscated.py"][1], r"torch compute op aten::(mm|matmul)")
        self.assertIn("subclass", seen["lazy_subclass.py"][1])
        self.assertRegex(seen["cache_by_address.py"][1], r"timed call|no Triton kernel launched")
        self.assertRegex(seen["cache_by_content.py"][1], r"timed call|no Triton kernel launched")
        self.assertIn("constant", seen["zeros.py"][1])
        self.assertIn("process(es) running after its calls", seen["process_after_return.py"][1])

    def test_a_cheat_leaves_nothing_behind_for_the_next_candidate(self):
        probe = ("import time, torch\n" + support.read(START) +
                 "\nprint('probe copy_', torch.Tensor.copy_.__qualname__, 'empty', torch.empty.__name__,"
                 " 'clock', time.perf_counter.__name__)\n")
        verdict, before = evaluate(self.server, probe)
        self.assertEqual(verdict, "verified", before.get("error"))
        with open(os.path.join(CHEATS, "poison_next.py"), encoding="utf-8") as f:
            evaluate(self.server, f.read())
        with open(os.path.join(CHEATS, "slow_clock.py"), encoding="utf-8") as f:
            evaluate(self.server, f.read())
        verdict, after = evaluate(self.server, probe + "\n# another copy\n")
        self.assertEqual(verdict, "verified", after.get("error"))
        v = self.server.request(op="verify", code=probe + "\n# third\n")
        self.assertIn("probe copy_ TensorBase.copy_ empty empty clock perf_counter", v["stdout"])

    def test_hash_sees_the_wrapper_not_only_the_kernel(self):
        code = support.read(START)
        h1 = self.server.request(op="hash", code=code)["result"]["hash"]
        h2 = self.server.request(op="hash", code=code + "\n# a comment only\n")["result"]["hash"]
        wrapped = code.replace("    return y\n", "    y = y.clone()\n    return y\n")
        h3 = self.server.request(op="hash", code=wrapped)["result"]["hash"]
        self.assertEqual(h1, h2)
        self.assertNotEqual(h1, h3)

    def test_tolerances_come_from_the_request(self):
        code = support.read(START)
        strict = self.server.request(op="verify", code=code + "\n# strict\n", rtol=0.0, atol=0.0)
        loose = self.server.request(op="verify", code=code + "\n# loose\n", rtol=1e-2, atol=1e-2)
        self.assertTrue(loose["ok"], loose)
        self.assertEqual(strict["result"]["rtol"], 0.0)


def corpus_after_a_poisoner(test, server):
    """The starting kernel verifies; a poisoner then patches what it can for whoever comes next; the
    cheats are rejected and the starting kernel verifies again after them."""
    start = support.read(START)
    verdict, first = evaluate(server, start)
    test.assertEqual(verdict, "verified", first.get("error"))
    # poison_next computes honestly and patches what it can for whoever comes next.
    with open(os.path.join(CHEATS, "poison_next.py"), encoding="utf-8") as f:
        evaluate(server, f.read())
    for cheat in ("cache_by_address.py", "cache_by_content.py", "zeros.py"):
        path = os.path.join(CHEATS, cheat)
        verdict, r = evaluate(server, support.read(path))
        test.assertEqual(verdict, expectation(path), (cheat, r.get("error")))
    verdict, again = evaluate(server, start + "\n# after the cheats\n")
    test.assertEqual(verdict, "verified", again.get("error"))


@contextlib.contextmanager
def matvec_judge(env):
    """A judge server (with `env` added) that loaded the small matvec problem on the CPU: (server, reply)."""
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(tmp, env)
        try:
            reply = server.request(op="load_problem", problem=support.MATVEC, device="cpu", size="small",
                                   trials=3, samples=3, calibrate_repeat=8)
            server.log_dir = tmp
            yield server, reply
        finally:
            server.request(op="shutdown")
            server.close()


JUDGE_MEMORY_PROBE = """
import os


def _ppid(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _probe():
    # The judge is the fork server's parent, without a sandbox (with one it is not even in this
    # process's PID namespace): its references, its choice of the sampled calls and its code are in its
    # memory.
    judge = _ppid(os.getppid())
    try:
        with open(f"/proc/{judge}/maps") as f:
            start = int(f.readline().split("-")[0], 16)
        with open(f"/proc/{judge}/mem", "rb") as f:
            f.seek(start)
            return f"read {len(f.read(16))} bytes of process {judge}"
    except OSError as exc:
        return f"denied: {type(exc).__name__}"


def _capabilities():
    with open("/proc/self/status") as f:
        return [line.split()[1] for line in f if line.startswith(("CapEff", "CapPrm", "CapBnd"))]


with open(PROBE_OUT, "w") as f:
    f.write(_probe() + "\\n" + " ".join(_capabilities()))
"""


class JudgeMemory(unittest.TestCase):
    """Candidate code runs as the same user as the judge. Without a sandbox the judge is in its PID
    namespace, and a process of the same user may read and write another's memory through
    /proc/PID/mem unless that one is not dumpable: the judge makes itself so before any worker exists."""

    def test_a_candidate_cannot_read_the_judges_memory(self):
        with matvec_judge({}) as (server, reply):
            self.assertTrue(reply["ok"], reply)
            out = os.path.join(server.log_dir, "probe.txt")
            code = support.read(START) + f"\nPROBE_OUT = {out!r}\n" + JUDGE_MEMORY_PROBE
            verdict, r = evaluate(server, code)
            self.assertEqual(verdict, "verified", r)
            with open(out, encoding="utf-8") as f:
                said = f.read()
            self.assertTrue(said.startswith("denied"), f"the candidate read the judge's memory: {said}")
            # Root or not, the candidate holds no capability (CapEff, CapPrm, CapBnd all zero).
            self.assertEqual(said.split("\n")[1].split(), ["0000000000000000"] * 3, said)


class Lean(unittest.TestCase):
    """Where two workers do not fit in device memory the judge prepares the next worker only between
    requests (forced here with KAGENT_JUDGE_LEAN=1: the CPU platform has no device memory to measure).
    The defences hold the same: a cheat is rejected and leaves nothing behind for the next candidate."""

    def test_lean_judge_keeps_every_defence(self):
        with matvec_judge({"KAGENT_JUDGE_LEAN": "1"}) as (server, reply):
            self.assertTrue(reply["ok"], reply)
            self.assertTrue(reply["result"]["memory"]["lean"])
            self.assertEqual(reply["result"]["memory"]["spares"], 0)
            # Only trial 0 stays resident; trials 1 and 2 are drawn again from their seeds, and a
            # kernel that is wrong only on them still fails there.
            self.assertTrue(reply["result"]["memory"]["lean_sets"])
            self.assertEqual(reply["result"]["memory"]["resident_trials"], 1)
            self.assertEqual(reply["result"]["trials"], 3)
            corpus_after_a_poisoner(self, server)


class Spares(unittest.TestCase):
    """Several prepared workers warm up side by side (a GPU with memory to spare; forced here with
    KAGENT_JUDGE_SPARES=3). Each candidate still gets a worker no earlier candidate touched: a
    poisoner cannot reach the spares warming beside it. A taken spare is replaced once its
    candidate's verification is over here (KAGENT_JUDGE_REFILL=verified; the other tests replace it
    at once, the default): either way spares live beside a candidate's process."""

    def test_three_spares_keep_every_defence(self):
        with matvec_judge({"KAGENT_JUDGE_SPARES": "3", "KAGENT_JUDGE_REFILL": "verified"}) as (server, reply):
            self.assertTrue(reply["ok"], reply)
            self.assertFalse(reply["result"]["memory"]["lean"])
            self.assertEqual(reply["result"]["memory"]["spares"], 3)
            # The fork server and three warming workers (a single spare would make two).
            self.assertGreaterEqual(len([p for p in judge.descendants(server.proc.pid) if judge.alive(p)]), 4)
            corpus_after_a_poisoner(self, server)


class SparesSetting(unittest.TestCase):
    def test_a_value_that_is_no_number_is_said_and_the_default_kept(self):
        with matvec_judge({"KAGENT_JUDGE_SPARES": "many"}) as (server, reply):
            self.assertTrue(reply["ok"], reply)
            self.assertEqual(reply["result"]["memory"]["spares"], 1)
            with open(os.path.join(server.log_dir, "server.log"), encoding="utf-8") as f:
                self.assertIn("judge: KAGENT_JUDGE_SPARES='many' is not a number of spares (1-8); "
                              "keeping the default, 1", f.read())


class SpareDepth(unittest.TestCase):
    """How many workers warm up beside the running candidate (judge.spare_depth, judge.room_for_spare)."""

    GIB = 2**30

    def test_lean_keeps_none_the_cpu_platform_one_and_a_gpu_up_to_three(self):
        self.assertEqual(judge.spare_depth(True, True), 0)
        self.assertEqual(judge.spare_depth(True, True, forced="3"), 0)
        self.assertEqual(judge.spare_depth(False, False), 1)
        self.assertEqual(judge.spare_depth(False, True), 3)

    def test_forced_depth_is_bounded(self):
        self.assertEqual(judge.spare_depth(False, False, forced="2"), 2)
        self.assertEqual(judge.spare_depth(False, True, forced="50"), 8)
        self.assertEqual(judge.spare_depth(False, True, forced="0"), 1)
        self.assertEqual(judge.spare_depth(False, True, forced="x"), 3)

    def test_a_spare_needs_room_for_itself_and_for_the_candidate(self):
        g = self.GIB
        # matvec on the H100 where four 13 GiB workers beside the judge ran a fifth out of memory: with
        # the candidate's worker and one spare held (39 GiB free), a second spare fits, a third (26 GiB
        # free) does not.
        self.assertTrue(judge.room_for_spare(13 * g, 39 * g, 8 * 2**20))
        self.assertFalse(judge.room_for_spare(13 * g, 26 * g, 8 * 2**20))
        # A spare still loading counts as a worker even before its memory shows.
        self.assertFalse(judge.room_for_spare(13 * g, 39 * g, 8 * 2**20, pending=1))
        # Outputs count four times (the candidate's and the sampled calls'), with 2 GiB of slack.
        self.assertTrue(judge.room_for_spare(g, 8 * g, g))
        self.assertFalse(judge.room_for_spare(g, 8 * g - 1, g))
        # Unknown sizes (the CPU platform): the depth alone decides.
        self.assertTrue(judge.room_for_spare(None, None, 0))


class TwoWorkers(unittest.TestCase):
    """Whether a second worker fits beside the first (judge.needed_for_two), on the sizes measured on
    an 80 GB H100 (benchmarks/RESULTS.md, eleventh session)."""

    GIB = 2**30

    def test_rmsnorm_with_lean_input_sets_still_fits_two_workers_on_an_80_gb_card(self):
        g = self.GIB
        need = judge.needed_for_two(int(12.3 * g), int(3.5 * g), int(3.5 * g), lean_sets=True)
        # The worker, four outputs, 2 GiB, and a trial's inputs and reference drawn again: 35.3 GiB.
        self.assertAlmostEqual(need / g, 12.3 + 4 * 3.5 + 2 + 7, places=3)
        self.assertLess(need, int(45.1 * g))  # free beside one worker there: not lean
        # Without lean sets nothing is drawn again during a verification.
        self.assertAlmostEqual(judge.needed_for_two(int(12.3 * g), int(3.5 * g), int(3.5 * g), False) / g, 28.3,
                               places=3)
        # A card with less room is lean.
        self.assertGreater(need, int(30 * g))

    def test_unknown_sizes_need_nothing_known(self):
        self.assertIsNone(judge.needed_for_two(None, 1, 1, True))


class ResidentSets(unittest.TestCase):
    """Which trials' inputs and references the judge keeps on the device, from its free memory and the
    problem's sizes."""

    def decide(self, free_gib, out_shape, in_bytes, env=None):
        import math
        import types
        self.notices = []
        stub = types.SimpleNamespace(input_bytes=in_bytes, output_bytes=math.prod(out_shape) * 2,  # bf16
                                     free_device_bytes=lambda: int(free_gib * 2**30), notice=self.notices.append)
        old = os.environ.pop("KAGENT_JUDGE_LEAN", None)
        try:
            if env is not None:
                os.environ["KAGENT_JUDGE_LEAN"] = env
            return judge.Judge.choose_resident_sets(stub, 3, 3)
        finally:
            os.environ.pop("KAGENT_JUDGE_LEAN", None)
            if old is not None:
                os.environ["KAGENT_JUDGE_LEAN"] = old

    def test_rmsnorm_is_lean_on_an_80_gb_card_and_not_on_a_141_gb_one(self):
        rms = (112, 64, 512, 512)  # 3.5 GiB in and out
        self.assertTrue(self.decide(72, rms, 112 * 64 * 512 * 512 * 2))
        self.assertTrue(self.notices and self.notices[0].startswith("judge: lean input sets"), self.notices)
        self.assertFalse(self.decide(133, rms, 112 * 64 * 512 * 512 * 2))
        self.assertEqual(self.notices, [])

    def test_matvec_keeps_every_trial_on_an_80_gb_card(self):
        self.assertFalse(self.decide(72, (2048, 1), 2048 * 1048576 * 2 + 1048576 * 2))

    def test_forced_either_way_and_one_trial_is_never_lean(self):
        self.assertTrue(self.decide(500, (4,), 8, env="1"))
        self.assertFalse(self.decide(1, (112, 64, 512, 512), 1 << 34, env="0"))
        import types
        stub = types.SimpleNamespace(input_bytes=1 << 40, output_bytes=8, free_device_bytes=lambda: 1,
                                     notice=lambda line: None)
        self.assertFalse(judge.Judge.choose_resident_sets(stub, 1, 3))


TWO_OUTPUTS_PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x + 1.0, x * 2.0


def get_inputs(device=None, dtype=None):
    return [torch.rand(64, 256, device=device or "cpu", dtype=dtype or torch.float32)]


def get_init_inputs():
    return []
"""

TWO_OUTPUTS_KERNEL = """import torch
import triton
import triton.language as tl


@triton.jit
def _two(x_ptr, a_ptr, b_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m).to(tl.float32)
    tl.store(a_ptr + offs, (x + 1.0).to(a_ptr.dtype.element_ty), mask=m)
    tl.store(b_ptr + offs, (x * 2.0).to(b_ptr.dtype.element_ty), mask=m)


def kernel_function(x):
    a = torch.empty_like(x)
    b = torch.empty_like(x)
    n = x.numel()
    _two[(triton.cdiv(n, 1024),)](x, a, b, n, BLOCK=1024)
    return a, b
"""


class TwoOutputs(unittest.TestCase):
    """A problem whose Model returns two tensors: every output of a sampled timed call is checked, so
    an honest kernel is verified (before, only the first output was kept and the second, left
    NaN-poisoned, failed every honest kernel as "differs from the reference") and a kernel whose
    second output is stale is still caught."""

    def test_an_honest_kernel_passes_and_a_stale_second_output_is_caught(self):
        with tempfile.TemporaryDirectory() as tmp:
            problem = support.write(tmp, "problem.py", TWO_OUTPUTS_PROBLEM)
            server = ServerProcess(tmp)
            try:
                r = server.request(op="load_problem", problem=problem, device="cpu", size="small", trials=3,
                                   samples=3, calibrate_repeat=8)
                self.assertTrue(r["ok"], r)
                verdict, reply = evaluate(server, TWO_OUTPUTS_KERNEL)
                self.assertEqual(verdict, "verified", reply.get("error"))
                # The second output is kept by input address and returned from then on: right for the
                # verification sets, stale for the timed calls, whose inputs change in place.
                stale = TWO_OUTPUTS_KERNEL.replace(
                    "    return a, b\n",
                    "    return a, _seen.setdefault(x.data_ptr(), b)\n") + "\n_seen = {}\n"
                verdict, reply = evaluate(server, stale)
                self.assertEqual(verdict, "integrity", reply.get("error"))
                self.assertIn("output 1", reply.get("error", ""))
            finally:
                server.request(op="shutdown")
                server.close()


class HungKernel(unittest.TestCase):
    """A verification call must show progress (worker.Progress): a kernel that makes none after its
    launch is stopped hang_s after it (a sixth of the verification timeout, at least 5 s), a call that
    compiles and launches nothing is stopped quiet_s after it starts (a third, at least 10 s), both
    long before the verification timeout; a call that keeps launching is left alone."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.server = ServerProcess(cls.tmp.name)
        reply = cls.server.request(op="load_problem", problem=support.MATVEC, device="cpu", size="small",
                                   trials=2, samples=2, calibrate_repeat=8, verify_timeout_s=30)
        assert reply["ok"], reply

    @classmethod
    def tearDownClass(cls):
        cls.server.request(op="shutdown")
        cls.server.close()
        cls.tmp.cleanup()

    def test_no_reply_after_a_launch_is_a_hung_kernel(self):
        # On a GPU the launch returns and the wait for the kernel never ends; here, the wrapper waits.
        code = support.read(START).replace("    return y\n", "    import time\n    time.sleep(600)\n    return y\n")
        v = self.server.request(op="verify", code=code)
        self.assertFalse(v["ok"], v)
        self.assertEqual(v.get("kind"), "timeout", v)
        self.assertIn("did not finish within 5 s of its launch", v.get("error", ""))
        # The device is free again: the next candidate is verified.
        verdict, reply = evaluate(self.server, support.read(START) + "\n# after the hung one\n")
        self.assertEqual(verdict, "verified", reply.get("error"))

    def test_a_call_that_launches_nothing_is_stuck(self):
        # The replay sets' "hanging" kernel: a Python loop that never reaches a kernel.
        code = support.read(START).replace("def kernel_function(A, B):\n",
                                           "def kernel_function(A, B):\n    import time\n    time.sleep(600)\n")
        v = self.server.request(op="verify", code=code)
        self.assertFalse(v["ok"], v)
        self.assertEqual(v.get("kind"), "timeout", v)
        self.assertIn("compiled and launched nothing within 10 s", v.get("error", ""))

    def test_each_launch_restarts_the_window(self):
        # Its first call takes longer than hang_s in all (3 s before its second launch, 3 s after it).
        launch = support.read(START)
        call = launch[launch.index("    matvec_kernel[grid]("):launch.index("    return y\n")]
        code = launch.replace(
            "    return y\n",
            "    if _first[0]:\n        import time\n        time.sleep(3)\n" + call.replace("    ", "        ", 1) +
            "        time.sleep(3)\n        _first[0] = False\n    return y\n") + "\n_first = [True]\n"
        verdict, reply = evaluate(self.server, code)
        self.assertEqual(verdict, "verified", reply.get("error"))


class Windows(unittest.TestCase):
    """judge.Judge.progress_windows: on a GPU a call gets a thirtieth of the verification timeout (at
    least 1 s) to show a first compile or launch; on the cpu platform a third (at least 10 s); a sixth (at
    least 5 s) after a launch on both. And the census reads /proc once for every lookup it makes."""

    @staticmethod
    def windows(gpu, verify_s):
        j = object.__new__(judge.Judge)  # no process state: only the rule
        j.gpu, j.timeouts = gpu, {"verify": verify_s}
        return j.progress_windows()

    def test_gpu_and_cpu_windows(self):
        self.assertEqual(self.windows(True, 29.0), (5.0, 1.0))     # CUDA's test_timeout_s 30, less a second
        self.assertEqual(self.windows(True, 60.0), (10.0, 2.0))
        self.assertEqual(self.windows(True, 300.0), (50.0, 10.0))
        self.assertEqual(self.windows(False, 29.0), (5.0, 10.0))   # the cpu platform keeps its 10 s floor
        self.assertEqual(self.windows(False, 300.0), (50.0, 100.0))

    def test_descendants_from_one_table(self):
        table = {10: 1, 11: 10, 12: 11, 13: 1, 14: 13}
        self.assertEqual(sorted(judge.descendants(10, table)), [11, 12])
        self.assertEqual(sorted(judge.descendants(13, table)), [14])
        self.assertEqual(judge.descendants(12, table), [])


class Floor(unittest.TestCase):
    def test_a_time_below_the_hardware_floor_is_rejected_and_the_fraction_reported(self):
        tmp = tempfile.TemporaryDirectory()
        server = ServerProcess(tmp.name)
        try:
            # A device whose peak bandwidth is absurdly low: every honest time is "too fast".
            r = server.request(op="load_problem", problem=support.MATVEC, device="cpu", size="small",
                               peak_gbps=1e-6, calibrate_repeat=5)
            self.assertTrue(r["ok"], r)
            verdict, reply = evaluate(server, support.read(START))
            self.assertEqual(verdict, "integrity")
            self.assertIn("below the hardware floor", reply["error"])
            r = server.request(op="load_problem", problem=support.MATVEC, device="cpu", size="small",
                               peak_gbps=1000.0, calibrate_repeat=5)
            verdict, reply = evaluate(server, support.read(START))
            self.assertEqual(verdict, "verified", reply.get("error"))
            res = reply["result"]
            self.assertGreater(res["floor_ms"], 0)
            self.assertAlmostEqual(res["floor_fraction"], res["floor_ms"] / res["candidate"]["median_ms"])
            # How long the timed loop waited for a CPU, from the kernel's count (0 where it has none).
            self.assertGreaterEqual(res["run_queue_wait_ms"], 0.0)
            self.assertLessEqual(res["run_queue_wait_ms"], res["wall_ms"])
        finally:
            server.request(op="shutdown")
            server.close()
            tmp.cleanup()


class WallBound(unittest.TestCase):
    def test_waiting_for_a_cpu_is_not_held_against_an_honest_kernel(self):
        # A fresh-clone CI run on 2 busy cores: an honest matvec kernel's 20 timed calls took 983.0 ms
        # seen from the judge, 411.2 ms reported, a calibrated loop overhead of 7.25 ms a call. The
        # loop had waited for a CPU most of the difference; without crediting that, it was "integrity".
        excess, allowed = judge.wall_bound_excess(983.0, 20, 7.25, [411.2 / 20] * 20, gpu=False)
        self.assertGreater(excess, allowed)
        excess, allowed = judge.wall_bound_excess(983.0 - 400.0, 20, 7.25, [411.2 / 20] * 20, gpu=False)
        self.assertLess(excess, allowed)
        # The same wait credited to a slowed timer (a thousandth of the time reported) still fails.
        excess, allowed = judge.wall_bound_excess(983.0 - 400.0, 20, 7.25, [0.4112 / 20] * 20, gpu=False)
        self.assertGreater(excess, allowed)

    def test_the_kernels_count_of_waiting_for_a_cpu_is_read(self):
        mine = judge.run_queue_wait_ms(os.getpid())
        if mine is None:
            self.skipTest("this kernel keeps no /proc/PID/schedstat")
        self.assertIsInstance(mine, float)
        self.assertGreaterEqual(mine, 0.0)
        self.assertIsNone(judge.run_queue_wait_ms(2**22 + 12345))  # no such process

    def test_reported_times_must_explain_the_wall_clock(self):
        honest, allowed = judge.wall_bound_excess(1000.0, 10, 5.0, [90.0] * 10, gpu=False)
        self.assertLess(honest, allowed)
        faked, allowed = judge.wall_bound_excess(1000.0, 10, 5.0, [0.09] * 10, gpu=False)
        self.assertGreater(faked, allowed)
        # A loaded CPU may double the loop's own overhead: still honest.
        loaded, allowed = judge.wall_bound_excess(900.0 + 2 * 10 * 5.0, 10, 5.0, [90.0] * 10, gpu=False)
        self.assertLess(loaded, allowed)
        # On a GPU the per-call allowance is small: a 1 ms kernel reported as 1 us is caught.
        faked, allowed = judge.wall_bound_excess(100 * 1.3, 100, 0.3, [0.001] * 100, gpu=True)
        self.assertGreater(faked, allowed)
        honest, allowed = judge.wall_bound_excess(100 * 1.32, 100, 0.3, [1.0] * 100, gpu=True)
        self.assertLess(honest, allowed)

    def test_a_forged_pad_buys_at_most_half_the_reported_time(self):
        # Honest: a 1 ms kernel that queued a 300 us device sleep before each call is credited for it.
        pad = judge.pad_credit_ms(300.0, [1.0] * 100)
        self.assertAlmostEqual(pad, 0.3)
        honest, allowed = judge.wall_bound_excess(100 * (1.32 + 0.3), 100, 0.3, [1.0] * 100, True, pad)
        self.assertLess(honest, allowed)
        # Without the credit, the same honest wall clock would look like hidden work.
        uncredited, allowed = judge.wall_bound_excess(100 * (1.32 + 1.0), 100, 0.3, [1.0] * 100, True, 0.0)
        self.assertGreater(uncredited, allowed)
        # The attack: a 1 ms kernel that reports 0.1 ms and claims an enormous pad to explain the rest.
        claimed = judge.pad_credit_ms(1e9, [0.1] * 100)
        self.assertAlmostEqual(claimed, 0.05)
        faked, allowed = judge.wall_bound_excess(100 * 1.32, 100, 0.3, [0.1] * 100, True, claimed)
        self.assertGreater(faked, allowed)
        for bad in (None, "x", float("nan"), -5.0):
            self.assertEqual(judge.pad_credit_ms(bad, [1.0] * 10), 0.0)
        self.assertLessEqual(judge.pad_credit_ms(5000.0, [100.0] * 10), judge.MAX_PAD_US / 1e3)


class Stamp(unittest.TestCase):
    """The worker's stamp is the judge's roll, bit for bit (the judge computes the sampled calls'
    references from its own rolled copy), and its undo gives back the exact inputs."""

    def test_the_worker_stamp_is_the_judges_roll_and_undoes_exactly(self):
        import random
        import torch
        import worker
        rng = random.Random(7)
        for dtype in (torch.bfloat16, torch.float32, torch.int64):
            a = (torch.randn(37, 53) * 100).to(dtype)
            b = (torch.randn(1000) * 100).to(dtype)
            pristine = [a.clone(), b.clone()]
            stamps = [[[0, 0, a.numel(), 1], [1, 10, 990, 989]]]
            for _ in range(20):
                st = []
                for k, t in enumerate((a, b)):
                    length = rng.randrange(2, t.numel() + 1)
                    st.append([k, rng.randrange(0, t.numel() - length + 1), length, rng.randrange(1, length)])
                stamps.append(st)
            for st in stamps:
                expected = [t.clone() for t in pristine]
                for k, start, length, shift in st:
                    view = expected[k].view(-1)[start:start + length]
                    view.copy_(view.roll(shift))
                inputs = [a, b]
                saved = worker.Worker.stamp(inputs, st)
                for got, want in zip(inputs, expected):
                    self.assertTrue(torch.equal(got, want), (dtype, st))
                worker.Worker.unstamp(saved)
                for got, want in zip(inputs, pristine):
                    self.assertTrue(torch.equal(got, want), (dtype, st))


    def test_a_permutation_stamp_moves_every_element_as_the_judge_does(self):
        import random
        import torch
        import worker
        rng = random.Random(3)
        for dtype in (torch.bfloat16, torch.float32, torch.int64):
            b = (torch.randn(1000) * 100).to(dtype)
            pristine = b.clone()
            for _ in range(10):
                shift, mult = rng.randrange(0, 1000), judge.coprime_multiplier(1000, rng)
                self.assertEqual(math.gcd(mult, 1000), 1)
                self.assertGreaterEqual(mult, 2)
                want = torch.stack([pristine[(mult * i - shift) % 1000] for i in range(1000)])
                saved = worker.Worker.stamp([b], [[0, 0, 1000, shift, mult]])
                self.assertTrue(torch.equal(b, want), (dtype, shift, mult))
                jd = judge.Judge.__new__(judge.Judge)
                jd.sets = [[pristine.clone()]]
                self.assertTrue(torch.equal(jd.stamped(0, [[0, 0, 1000, shift, mult]])[0], want))
                worker.Worker.unstamp(saved)
                self.assertTrue(torch.equal(b, pristine))


class WarmUp(unittest.TestCase):
    """Warm-up calls are neither stamped nor preceded by a flush (nothing checks or times them);
    every timed call is both."""

    def test_the_judge_stamps_only_the_timed_calls(self):
        import random
        import torch
        jd = judge.Judge.__new__(judge.Judge)
        jd.sets = [[torch.zeros(64, 32), torch.zeros(32, 1), 3]]
        jd.seeds = [0, 1, 2]
        stamps = jd.loop_stamps(4, 6, random.Random(1))
        self.assertEqual(len(stamps), 10)
        self.assertEqual(stamps[:4], [[]] * 4)
        for st in stamps[4:]:
            self.assertEqual([k for k, *_ in st], [0, 1], "one stamp per input tensor, none for the int")

    def test_small_inputs_are_permuted_whole_and_large_ones_rolled_in_a_window(self):
        import random
        import torch
        jd = judge.Judge.__new__(judge.Judge)
        big = torch.empty(judge.WHOLE_STAMP_BYTES // 2 + 1, dtype=torch.bfloat16)
        jd.sets = [[big, torch.zeros(1024, 1), torch.zeros(big.numel() // 8, dtype=torch.bfloat16)]]
        jd.seeds = [0]
        for (kb, start, length, shift, mult), (ks, s0, n, _, m), mid in jd.stamps_for(20, random.Random(5)):
            # Over a sixteenth of the largest input: a window, however small it is.
            self.assertEqual((mid[0], mid[2], mid[4]), (2, big.numel() // 128, 1))
            self.assertEqual((kb, length, mult), (0, big.numel() // 16, 1))
            self.assertTrue(0 <= start <= big.numel() - length and 1 <= shift < length)
            self.assertEqual((ks, s0, n), (1, 0, 1024))
            self.assertTrue(2 <= m < 1024 and m % 2 == 1, m)

    def test_the_worker_flushes_and_stamps_only_where_told(self):
        import torch
        import worker
        w = worker.Worker(tempfile.mkdtemp())
        a = torch.arange(16.0)
        w.sets = [[a]]
        w.flush_buf = torch.ones(8, dtype=torch.int32)
        seen = []

        def fn(x):
            seen.append(x.clone())
            return x

        w.loop(fn, 3, [[]] * 3, keep=None, flush=False)
        self.assertTrue(all(torch.equal(x, torch.arange(16.0)) for x in seen), "warm-up calls see their inputs as they are")
        self.assertEqual(int(w.flush_buf.sum()), 8, "no flush in the warm-up")
        seen.clear()
        w.loop(fn, 2, [[[0, 0, 16, 5]], [[0, 4, 8, 3]]], keep=None)
        self.assertTrue(torch.equal(seen[0], torch.arange(16.0).roll(5)))
        self.assertFalse(torch.equal(seen[1], torch.arange(16.0)))
        self.assertEqual(int(w.flush_buf.sum()), 0, "a flush before each timed call")
        self.assertTrue(torch.equal(a, torch.arange(16.0)), "every stamp undone")


class Census(unittest.TestCase):
    def test_descendants_are_the_whole_tree_below_a_process(self):
        import subprocess
        import time
        p = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30 & sh -c 'sleep 30 & wait' & wait"])
        try:
            deadline = time.monotonic() + 10
            while len(judge.descendants(p.pid)) < 4 and time.monotonic() < deadline:
                time.sleep(0.05)
            below = judge.descendants(p.pid)
            self.assertEqual(len(below), 4, below)  # two sleeps, the inner sh and its sleep
            self.assertNotIn(p.pid, below)
            self.assertTrue(set(below) <= set(judge.descendants(os.getpid())))
            self.assertEqual(sorted(judge.children_of(os.getpid())).count(p.pid), 1)
        finally:
            for q in [p.pid] + judge.descendants(p.pid):
                with contextlib.suppress(OSError):
                    os.kill(q, 9)
            p.wait()

    def test_new_below_finds_what_appeared_through_every_thread_and_leaves_out_skipped_subtrees(self):
        import subprocess
        import threading
        import time
        known = set(judge.descendants(os.getpid()))
        old = subprocess.Popen(["sleep", "30"])  # a child of ours, known to the walk below
        known.add(old.pid)
        kids = []
        # Forked from a thread other than the main one: listed under that thread's children file.
        t = threading.Thread(target=lambda: kids.append(subprocess.Popen(["sh", "-c", "sleep 30 & wait"])))
        t.start()
        t.join()
        skipped = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
        try:
            deadline = time.monotonic() + 10
            while len(judge.descendants(kids[0].pid)) < 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            found = judge.new_below(os.getpid(), known, watched=None, skip={skipped.pid})
            self.assertIn(kids[0].pid, found)
            self.assertTrue(set(judge.descendants(kids[0].pid)) <= set(found), found)
            self.assertNotIn(old.pid, found)
            self.assertNotIn(skipped.pid, found)
            self.assertFalse(set(judge.descendants(skipped.pid)) & set(found))
            if judge.CHILDREN_FILES:
                # The same answer the walk over all of /proc gives, less the skipped subtree.
                every = set(judge.descendants(os.getpid())) - known - {skipped.pid} - set(judge.descendants(skipped.pid))
                self.assertEqual(set(found), {p for p in every if judge.alive(p)})
        finally:
            for p in [old, skipped] + kids:
                for q in [p.pid] + judge.descendants(p.pid):
                    with contextlib.suppress(OSError):
                        os.kill(q, 9)
                p.wait()

    def test_hooks_changed_names_each_kind_of_hook(self):
        import gc
        import signal
        import sys
        sys.path.insert(0, os.path.join(support.ROOT, "harness"))
        import worker
        before = worker.hooks_snapshot()
        self.assertEqual(worker.hooks_changed(before), [])
        old_profile = sys.getprofile()
        sys.setprofile(lambda *a: None)
        try:
            self.assertEqual(worker.hooks_changed(before), ["sys.setprofile"])
        finally:
            sys.setprofile(old_profile)
        cb = lambda *a: None  # noqa: E731
        gc.callbacks.append(cb)
        old_usr1 = signal.signal(signal.SIGUSR1, lambda *a: None)
        try:
            self.assertEqual(worker.hooks_changed(before), ["gc.callbacks", f"signal {int(signal.SIGUSR1)}"])
        finally:
            gc.callbacks.remove(cb)
            signal.signal(signal.SIGUSR1, old_usr1)
        self.assertEqual(worker.hooks_changed(before), [])

    def test_hooks_changed_sees_torch_modes_and_kernels_but_not_meta_ones(self):
        import sys
        import warnings
        import torch
        from torch.overrides import TorchFunctionMode
        sys.path.insert(0, os.path.join(support.ROOT, "harness"))
        import worker
        worker.bind_torch_hooks(torch)
        try:
            before = worker.hooks_snapshot()
            with TorchFunctionMode():
                self.assertEqual(worker.hooks_changed(before), ["torch function mode"])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # overriding a kernel warns
                lib = torch.library.Library("aten", "IMPL")
                try:
                    lib.impl("clone", lambda t, memory_format=None: t, "Meta")  # runs for no real tensor: not a hook
                    self.assertEqual(worker.hooks_changed(before), [])
                    lib.impl("zero_", lambda t: t, "AutogradCPU")
                    self.assertEqual(worker.hooks_changed(before), ["the dispatch table of aten::zero_"])
                    self.assertEqual(worker.hooks_changed(before, tables=False), [])  # read one call in four
                finally:
                    lib._destroy()
            self.assertEqual(worker.hooks_changed(before), [])
        finally:
            worker._torch_hooks.clear()

    def test_thread_count_sees_threads_threading_does_not(self):
        import _thread
        import threading
        import time
        before = judge.thread_count(os.getpid())
        stop = threading.Event()
        _thread.start_new_thread(stop.wait, ())
        time.sleep(0.1)
        try:
            self.assertEqual(judge.thread_count(os.getpid()), before + 1)
        finally:
            stop.set()


class TableLooks(unittest.TestCase):
    def test_a_kernel_registered_for_all_but_the_last_call_is_seen_but_one_time_in_a_thousand(self):
        import worker
        for n in (2, 3, 5, 10, 20, 60, 100):
            p = worker.table_look_rate(n)
            self.assertGreaterEqual(p, 0.25)
            self.assertLessEqual(p, 1.0)
            self.assertLessEqual((1 - p) ** (n - 1), 0.001 + 1e-12, n)
        self.assertEqual(worker.table_look_rate(1), 1.0)
        self.assertEqual(worker.table_look_rate(100), 0.25)  # a GPU's long loop: no more looks than before


class RecorderMarks(unittest.TestCase):
    """The op recorder's session around a timed loop: an op is the call's when it started between the
    call's mark and the end mark entered after it, by the profiler's own numbering (correlation ids),
    whatever its timestamp says; and marks a candidate enters itself do not go unnoticed."""

    def run_loop(self, call, n=3, between=None):
        import torch
        import worker
        rec = worker.OpRecorder("profiler")
        a = torch.ones(8)
        with rec.loop_session():
            for _ in range(n):
                (between or (lambda: a * 3))()  # the loop's own work: a compute op between the calls
                with rec.call_scope():
                    call(a)
        return rec

    def test_only_the_ops_between_a_call_and_its_end_mark_are_the_calls(self):
        rec = self.run_loop(lambda a: a.clone())
        self.assertIsNone(rec.mark_problem)
        self.assertEqual(rec.marks_found, 3)
        self.assertIn("aten::clone", rec.ops)
        self.assertNotIn("aten::mul", rec.ops)
        self.assertEqual(judge.core.forbidden_ops(rec.seen()), [])
        rec = self.run_loop(lambda a: a + 1)
        self.assertIn("aten::add", judge.core.forbidden_ops(rec.seen()))

    def test_the_order_decides_not_the_clock(self):
        # Every event of the session starts at the same instant, as a skewed clock could make them: the
        # loop's own op between the calls still belongs to no call.
        import torch.autograd.profiler as autograd_profiler
        real = autograd_profiler.profile.__exit__

        def exit_then_flatten(prof, *exc):
            out = real(prof, *exc)
            events = list(prof.kineto_results.events())

            class Same:
                def __init__(self, e):
                    self.e = e

                def __getattr__(self, k):
                    return getattr(self.e, k)

                def start_ns(self):
                    return events[0].start_ns()

            flat = [Same(e) for e in events]
            prof.kineto_results = type("R", (), {"events": lambda self: flat})()
            return out

        autograd_profiler.profile.__exit__ = exit_then_flatten
        try:
            rec = self.run_loop(lambda a: a.clone())
        finally:
            autograd_profiler.profile.__exit__ = real
        self.assertEqual(rec.marks_found, 3)
        self.assertNotIn("aten::mul", rec.ops)

    def test_an_end_mark_entered_inside_the_call_breaks_the_pairs(self):
        import torch.autograd.profiler as autograd_profiler
        import worker

        def forged(a):
            with autograd_profiler.record_function(worker.OpRecorder.END_MARK):
                pass
            a + 1

        rec = self.run_loop(forged)
        self.assertIn("outside any call", rec.mark_problem or "")

    def test_a_forged_pair_of_marks_is_counted(self):
        import torch.autograd.profiler as autograd_profiler
        import worker

        def forged(a):
            with autograd_profiler.record_function(worker.OpRecorder.END_MARK):
                pass
            a + 1
            with autograd_profiler.record_function(worker.OpRecorder.CALL_MARK):
                pass

        rec = self.run_loop(forged)
        self.assertIn("6 marked calls recorded for the 3", rec.mark_problem or "")


if __name__ == "__main__":
    unittest.main()
