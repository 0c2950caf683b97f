"""profile_wrapper.py, the program the profilers run: inputs on the device, optional get_init_inputs,
warm-ups then one measured call, exit status and the output-shape line (CPU platform, Triton interpreter)."""
import contextlib
import io
import os
import subprocess
import sys
import tempfile
import unittest

import support
import profile_wrapper as pw

WRAPPER = os.path.join(support.HARNESS, "profile_wrapper.py")

# No get_init_inputs, and a get_inputs without device/dtype parameters that builds on the default device.
PLAIN_PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x * 2

def get_inputs():
    return [torch.rand(8, 4), torch.arange(8)]
"""
DOUBLE_KERNEL = """
import torch

def kernel_function(x, idx):
    return x * 2
"""
# Appends one line per call to the file named by KAGENT_TEST_CALLS: the warm-ups and the measured call.
COUNTING_KERNEL = """
import os

def kernel_function(x, idx):
    with open(os.environ["KAGENT_TEST_CALLS"], "a") as f:
        f.write(f"{x.device} {x.dtype} {idx.dtype}\\n")
    return x + 1
"""
# Asks for eps, which only the Model (built from get_init_inputs) can provide.
EPS_PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, features, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(features))

    def forward(self, x):
        return x * self.weight + self.eps

def get_inputs(device=None, dtype=None):
    return [torch.ones(2, 4, device=device or "cpu", dtype=dtype or torch.float32)]

def get_init_inputs():
    return [4, 0.25]
"""
EPS_KERNEL = """
def kernel_function(x, weight, eps):
    return x * weight + eps
"""
RAISING_KERNEL = """
def kernel_function(x, idx):
    raise RuntimeError("deliberate kernel failure")
"""


def run_main(args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = pw.main(args)
    return rc, out.getvalue(), err.getvalue()


class ProfileWrapper(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        os.environ.pop("KAGENT_TEST_CALLS", None)
        self.tmp.cleanup()

    def file(self, name, text):
        return support.write(self.dir, name, text)

    def test_matvec_example_runs_on_the_cpu_through_the_cli(self):
        # The way a profiler runs it: a fresh interpreter, the Triton interpreter, the small shape.
        env = dict(os.environ)
        env.pop("TRITON_INTERPRET", None)
        env.pop("KAGENT_PROBLEM_SIZE", None)
        r = subprocess.run([sys.executable, WRAPPER, "--problem", support.MATVEC,
                            "--kernel", os.path.join(support.MATVEC, "input.py"), "--device", "cpu"],
                           capture_output=True, text=True, env=env, cwd=self.dir, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip().splitlines()[-1], "output shape: (64, 1)")

    def test_three_warmups_then_one_measured_call_with_inputs_made_as_asked(self):
        problem = self.file("problem.py", PLAIN_PROBLEM)
        kernel = self.file("kernel.py", COUNTING_KERNEL)
        calls = os.path.join(self.dir, "calls.txt")
        os.environ["KAGENT_TEST_CALLS"] = calls
        rc, out, err = run_main(["--problem", problem, "--kernel", kernel, "--device", "cpu", "--dtype", "float16"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.strip(), "output shape: (8, 4)")
        with open(calls) as f:
            lines = f.read().splitlines()
        # Floating inputs take the dtype; integer ones keep theirs.
        self.assertEqual(lines, ["cpu torch.float16 torch.int64"] * 4)

    def test_warmup_count_is_configurable(self):
        problem = self.file("problem.py", PLAIN_PROBLEM)
        kernel = self.file("kernel.py", COUNTING_KERNEL)
        calls = os.path.join(self.dir, "calls.txt")
        os.environ["KAGENT_TEST_CALLS"] = calls
        rc, _, err = run_main(["--problem", problem, "--kernel", kernel, "--device", "cpu", "--warmup", "0"])
        self.assertEqual(rc, 0, err)
        with open(calls) as f:
            self.assertEqual(len(f.read().splitlines()), 1)

    def test_inputs_are_created_on_the_device_not_copied_there(self):
        # The meta device has no storage: a tensor built on the host and moved would have to exist
        # first on the cpu; under torch.device("meta") the factory calls themselves produce meta tensors.
        import torch
        module = type(sys)("p")
        exec(PLAIN_PROBLEM, module.__dict__)
        made = []
        real_rand = torch.rand

        def spy_rand(*a, **k):
            t = real_rand(*a, **k)
            made.append(t.device.type)
            return t

        torch.rand = spy_rand
        try:
            inputs = pw.make_inputs(torch, module, "meta", torch.bfloat16)
        finally:
            torch.rand = real_rand
        self.assertEqual(made, ["meta"])
        self.assertEqual([t.device.type for t in inputs], ["meta", "meta"])
        self.assertEqual(inputs[0].dtype, torch.bfloat16)
        self.assertEqual(inputs[1].dtype, torch.int64)
        # A get_inputs that takes device/dtype gets them passed.
        module2 = type(sys)("p2")
        exec(EPS_PROBLEM, module2.__dict__)
        (x,) = pw.make_inputs(torch, module2, "meta", torch.float16)
        self.assertEqual((x.device.type, x.dtype), ("meta", torch.float16))

    def test_model_parameters_come_from_get_init_inputs_when_the_kernel_asks(self):
        problem = self.file("problem.py", EPS_PROBLEM)
        kernel = self.file("kernel.py", EPS_KERNEL)
        rc, out, err = run_main(["--problem", problem, "--kernel", kernel, "--device", "cpu", "--dtype", "float32"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.strip(), "output shape: (2, 4)")
        self.assertTrue(pw.needs_model(pw_fn(EPS_KERNEL), 1))
        self.assertFalse(pw.needs_model(pw_fn(DOUBLE_KERNEL), 2))

    def test_a_failing_kernel_exits_1_with_its_traceback(self):
        problem = self.file("problem.py", PLAIN_PROBLEM)
        kernel = self.file("kernel.py", RAISING_KERNEL)
        rc, out, err = run_main(["--problem", problem, "--kernel", kernel, "--device", "cpu"])
        self.assertEqual(rc, 1)
        self.assertIn("deliberate kernel failure", err)
        self.assertNotIn("output shape", out)

    def test_missing_files_and_a_missing_kernel_function(self):
        problem = self.file("problem.py", PLAIN_PROBLEM)
        rc, _, err = run_main(["--problem", problem, "--kernel", os.path.join(self.dir, "nope.py"), "--device", "cpu"])
        self.assertEqual(rc, 2)
        self.assertIn("kernel file not found", err)
        kernel = self.file("kernel.py", "x = 1\n")
        rc, _, err = run_main(["--problem", problem, "--kernel", kernel, "--device", "cpu"])
        self.assertEqual(rc, 1)
        self.assertIn("no callable kernel_function", err)

    def test_dtype_inference_follows_the_benchmark_rule(self):
        self.assertEqual(pw.infer_dtype("x.to(torch.bfloat16); acc = tl.float32"), "bfloat16")
        self.assertEqual(pw.infer_dtype("y = x.half()"), "float16")
        self.assertEqual(pw.infer_dtype("tl.FLOAT16"), "float16")
        self.assertEqual(pw.infer_dtype("acc: tl.float32"), "float32")
        self.assertEqual(pw.infer_dtype("pass"), "bfloat16")


def pw_fn(code):
    namespace = {}
    exec(code, namespace)
    return namespace["kernel_function"]


if __name__ == "__main__":
    unittest.main()


class ProfileWrapperBatch(unittest.TestCase):
    """--batch: several kernels in one process, a marker before each, a failure fails only its kernel."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def file(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_each_kernel_runs_after_its_marker_and_a_failing_one_does_not_stop_the_batch(self):
        problem = self.file("problem.py", PLAIN_PROBLEM)
        calls = os.path.join(self.dir, "calls.txt")
        os.environ["KAGENT_TEST_CALLS"] = calls
        self.addCleanup(os.environ.pop, "KAGENT_TEST_CALLS", None)
        good = self.file("good.py", COUNTING_KERNEL)
        bad = self.file("bad.py", RAISING_KERNEL)
        double = self.file("double.py", DOUBLE_KERNEL)
        import batch_marker
        launched = []
        original = batch_marker.Marker.launch

        def spy(marker, index):
            launched.append(index)
            return original(marker, index)

        batch_marker.Marker.launch = spy
        self.addCleanup(setattr, batch_marker.Marker, "launch", original)
        rc, out, err = run_main(["--problem", problem, "--device", "cpu", "--batch", f"a={good}",
                                 "--batch", f"b={bad}", "--batch", f"c={double}"])
        self.assertEqual(rc, 0, err)
        lines = out.strip().splitlines()
        self.assertIn("kernel a output shape: (8, 4)", lines)
        self.assertIn("kernel b failed: RuntimeError: deliberate kernel failure", lines)
        self.assertIn("kernel c output shape: (8, 4)", lines)
        self.assertEqual(lines[-1], "batch: 2 of 3 kernel(s) ran")
        self.assertEqual(launched, [0, 1, 2], "one marker per kernel, in order, before it runs")
        with open(calls) as f:
            self.assertEqual(len(f.read().splitlines()), 4, "3 warm-ups and the measured call of kernel a")

    def test_bad_batch_arguments_are_usage_errors(self):
        problem = self.file("problem.py", PLAIN_PROBLEM)
        k = self.file("k.py", DOUBLE_KERNEL)
        for args in (["--batch", k], ["--batch", f"a/b={k}"], ["--batch", f"a={k}", "--batch", f"a={k}"],
                     ["--kernel", k, "--batch", f"a={k}"], []):
            with self.subTest(args=args), self.assertRaises(SystemExit) as cm:
                run_main(["--problem", problem, "--device", "cpu"] + args)
            self.assertEqual(cm.exception.code, 2)
