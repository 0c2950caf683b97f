"""verify / benchmark / hash on the CPU platform (Triton interpreter, small shapes)."""
import os
import tempfile
import unittest

import support
import harness_core as core

WRONG_MATVEC = """
import torch
def kernel_function(A, B):
    return (A.float() * B.float().T).sum(1, keepdim=True).to(A.dtype) * 1.5
"""
NAN_MATVEC = """
import torch
def kernel_function(A, B):
    y = (A.float() * B.float().T).sum(1, keepdim=True)
    y[3] = float('nan')
    return y.to(A.dtype)
"""
# Writes every row except the first eight; torch.empty leaves them to whatever memory held.
UNWRITTEN_MATVEC = """
import torch
def kernel_function(A, B):
    y = torch.empty((A.shape[0], 1), dtype=A.dtype, device=A.device)
    y[8:] = (A[8:].float() * B.float().T).sum(1, keepdim=True).to(A.dtype)
    return y
"""
RAISING = """
def kernel_function(A, B):
    print("about to fail")
    raise ValueError("deliberate failure")
"""
# A runtime (non-constexpr) loop bound: the Triton interpreter cannot run it.
RUNTIME_BOUND_MATVEC = """
import torch, triton, triton.language as tl

@triton.jit
def k(a_ptr, x_ptr, y_ptr, K, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        acc += tl.load(a_ptr + row * K + cols).to(tl.float32) * tl.load(x_ptr + cols).to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc).to(y_ptr.dtype.element_ty))

def kernel_function(A, B):
    y = torch.empty((A.shape[0], 1), dtype=A.dtype, device=A.device)
    k[(A.shape[0],)](A, B, y, A.shape[1], BLOCK_K=256)
    return y
"""


class Verify(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def verify(self, directory, code):
        return core.verify(support.problem(directory), support.candidate(self.tmp.name, code))

    def test_matvec_starting_kernel_passes(self):
        with open(os.path.join(support.MATVEC, "input.py")) as f:
            result = self.verify(support.MATVEC, f.read())
        self.assertTrue(result["passed"], result["error"])
        self.assertEqual(result["rtol"], 1e-2)
        self.assertIn("first_call_s", result["timings"])

    def test_rmsnorm_starting_kernel_passes(self):
        with open(os.path.join(support.RMSNORM, "input.py")) as f:
            result = self.verify(support.RMSNORM, f.read())
        self.assertTrue(result["passed"], result["error"])

    def test_wrong_kernel_fails_with_max_difference(self):
        result = self.verify(support.MATVEC, WRONG_MATVEC)
        self.assertFalse(result["passed"])
        self.assertTrue(result["error"].startswith("FAIL: max difference = "), result["error"])

    def test_nan_output_fails(self):
        result = self.verify(support.MATVEC, NAN_MATVEC)
        self.assertFalse(result["passed"])
        self.assertIn("NaN/Inf", result["error"])

    def test_unwritten_output_elements_fail(self):
        result = self.verify(support.MATVEC, UNWRITTEN_MATVEC)
        self.assertFalse(result["passed"])
        self.assertIn("8 NaN/Inf element(s)", result["error"])

    def test_poisoning_fills_every_empty_allocation(self):
        torch = core.torch_module()
        with core.poisoned_allocations():
            made = [torch.empty(4), torch.empty_like(torch.ones(3)), torch.empty_strided((2,), (1,)),
                    torch.ones(2).new_empty(5), torch.empty(3, dtype=torch.int32)]
        for t in made[:4]:
            self.assertTrue(torch.isnan(t).all(), t)
        self.assertTrue((made[4] == torch.iinfo(torch.int32).max).all())
        self.assertFalse(torch.isnan(torch.empty(1000).fill_(0)).any())  # restored afterwards
        self.assertIs(torch.empty, core.torch_module().empty)

    def test_allocators_bound_at_import_poison_only_during_verification(self):
        torch = core.torch_module()
        cand = support.candidate(self.tmp.name, "from torch import empty\n"
                                 "def kernel_function(A, B):\n    return empty(3)\n")
        with core.poisoned_allocations():
            self.assertTrue(torch.isnan(cand.fn(None, None)).all())
        self.assertIsNot(torch.empty, cand.module.empty)  # the real allocator is back in torch
        out = cand.fn(None, None)
        self.assertEqual(out.shape, (3,))  # outside verification the wrapper fills nothing
        self.assertTrue(hasattr(cand.module.empty, "kagent_original"))

    def test_memoizing_kernel_fails_on_a_second_random_trial(self):
        code = ("import torch\n_cache = {}\n"
                "def kernel_function(A, B):\n"
                "    if 'y' not in _cache:\n"
                "        _cache['y'] = (A.float() * B.float().T).sum(1, keepdim=True).to(A.dtype)\n"
                "    return _cache['y'].clone()\n")
        one = self.verify(support.MATVEC, code)
        self.assertTrue(one["passed"], one["error"])  # same inputs every call: the cache looks right
        more = core.verify(support.problem(support.MATVEC), support.candidate(self.tmp.name, code, "k2.py"),
                           trials=2)
        self.assertFalse(more["passed"])
        self.assertTrue(more["error"].startswith("trial 1 (seed 1): FAIL: max difference = "), more["error"])
        with open(os.path.join(support.MATVEC, "input.py")) as f:
            good = core.verify(support.problem(support.MATVEC), support.candidate(self.tmp.name, f.read(), "k3.py"),
                               trials=3)
        self.assertTrue(good["passed"], good["error"])
        self.assertEqual(good["trials"], 3)

    def test_exception_is_reported_with_its_message(self):
        with self.assertRaises(core.CandidateError) as cm:
            self.verify(support.MATVEC, RAISING)
        self.assertIn("ValueError: deliberate failure", str(cm.exception))
        self.assertIn("deliberate failure", cm.exception.traceback_text)
        self.assertFalse(cm.exception.poisoned)

    def test_missing_kernel_function(self):
        with self.assertRaises(core.CandidateError) as cm:
            support.candidate(self.tmp.name, "x = 1\n")
        self.assertIn("kernel_function", str(cm.exception))

    def test_syntax_error_is_an_import_failure(self):
        with self.assertRaises(core.CandidateError) as cm:
            support.candidate(self.tmp.name, "def kernel_function(:\n")
        self.assertIn("import failed: SyntaxError", str(cm.exception))

    def test_interpreter_failure_carries_the_constexpr_hint(self):
        with self.assertRaises(core.CandidateError) as cm:
            self.verify(support.MATVEC, RUNTIME_BOUND_MATVEC)
        self.assertIn("tl.constexpr", str(cm.exception))

    def test_poisoning_markers(self):
        self.assertTrue(core.is_poisoning("RuntimeError: CUDA error: an illegal memory access was encountered"))
        self.assertTrue(core.is_poisoning("HIP error: hipErrorIllegalAddress"))
        self.assertFalse(core.is_poisoning("ValueError: shapes differ"))


class Benchmark(unittest.TestCase):
    def test_result_shape_for_candidate_and_eager(self):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(support.RMSNORM, "input.py")) as f:
                cand = support.candidate(tmp, f.read())
            result = core.benchmark(support.problem(support.RMSNORM), cand, warmup=1, repeat=3,
                                    targets=["candidate", "eager"], flush_bytes=1 << 20)
        self.assertEqual(result["method"], "perf_counter")
        for target in ("candidate", "eager"):
            s = result[target]
            self.assertEqual(s["n"], 3)
            self.assertLessEqual(s["min_ms"], s["median_ms"])
            self.assertLessEqual(s["median_ms"], s["max_ms"])
            self.assertGreater(s["min_ms"], 0.0)
        self.assertAlmostEqual(result["speedup_vs_eager"],
                               result["eager"]["median_ms"] / result["candidate"]["median_ms"])
        self.assertNotIn("compile", result)
        self.assertGreater(result["input_sets"], 1)  # 64 KiB of input fits the cache: rotated

    def test_in_place_kernels_never_touch_the_cached_inputs(self):
        problem = support.problem(support.MATVEC)
        before = [t.clone() for t in problem.inputs]
        with tempfile.TemporaryDirectory() as tmp:
            cand = support.candidate(tmp, "def kernel_function(A, B):\n    A.zero_()\n    B.fill_(7)\n")
            core.benchmark(problem, cand, warmup=1, repeat=2, targets=["candidate"], flush_bytes=1 << 20)
            result = core.verify(problem, cand)
        self.assertFalse(result["passed"])
        for old, new in zip(before, problem.inputs):
            self.assertTrue(core.torch_module().equal(old, new))

    def test_stats(self):
        s = core.stats([4.0, 1.0, 3.0, 2.0])
        self.assertEqual((s["min_ms"], s["median_ms"], s["max_ms"], s["n"]), (1.0, 2.5, 4.0, 4))


class SourceHash(unittest.TestCase):
    def test_interpreter_candidates_hash_their_normalised_source(self):
        with tempfile.TemporaryDirectory() as tmp:
            a = support.candidate(tmp, "def kernel_function(A, B):\n    return A  # a\n", "a.py")
            b = support.candidate(tmp, "def kernel_function(A,B):\n\n    return A\n", "b.py")
            c = support.candidate(tmp, "def kernel_function(A, B):\n    return B\n", "c.py")
        ha, hb, hc = core.code_hash(a), core.code_hash(b), core.code_hash(c)
        self.assertEqual(ha["kind"], "source")
        self.assertEqual(ha["hash"], hb["hash"])
        self.assertNotEqual(ha["hash"], hc["hash"])


if __name__ == "__main__":
    unittest.main()


class ProblemErrors(unittest.TestCase):
    """A failure of the user's problem.py is theirs: a ProblemError naming the file and its line."""

    def load(self, code):
        with tempfile.TemporaryDirectory() as tmp:
            path = support.write(tmp, "problem.py", code)
            with self.assertRaises(core.ProblemError) as ctx:
                core.Problem(path, "cpu", "bfloat16", "small")
            return ctx.exception

    def test_an_exception_in_get_inputs_names_problem_py_and_its_line(self):
        exc = self.load("import torch\nclass Model(torch.nn.Module):\n    def forward(self, a):\n        return a\n"
                        "def get_inputs():\n    return [missing_name]\n")
        self.assertIn("problem.py line 6", str(exc))
        self.assertIn("NameError", str(exc))
        self.assertIn("missing_name", exc.traceback_text)

    def test_a_syntax_error_names_its_line(self):
        exc = self.load("import torch\n\ndef get_inputs(:\n    return []\n")
        self.assertIn("problem.py line 3", str(exc))
        self.assertIn("SyntaxError", str(exc))

    def test_a_missing_model_says_what_problem_py_must_define(self):
        exc = self.load("def get_inputs():\n    return []\n")
        self.assertIn("defines no Model", str(exc))
