import unittest

import support  # noqa: F401 - sets up the path
import harness_core as core

PREFIX = "Disallowed PyTorch usage detected: "


class BanCheck(unittest.TestCase):
    def assertBanned(self, code):
        msg = core.ban_check(code)
        self.assertIsNotNone(msg, code)
        self.assertTrue(msg.startswith(PREFIX), msg)

    def test_each_forbidden_form_is_caught(self):
        for code in ["import torch.nn as nn\n", "from torch import nn\n", "import torch.nn.functional as F\n",
                     "y = torch.nn.functional.relu(x)\n", "y = F.relu(x)\n", "y = torch.conv2d(x, w)\n",
                     "y = torch.relu(x)\n", "y = torch.softmax(x, -1)\n", "y = torch.max_pool2d(x, 2)\n",
                     "class M(nn.Module):\n    pass\n", "y = m.forward(x)\n", "y = torch.ops.aten.mm(a, b)\n",
                     "y = torch.matmul(a, b)\n", "y = torch.mm(a, b)\n", "y = torch.bmm(a, b)\n",
                     "y = a.matmul(b)\n", "y = a.mm(b)\n", "y = torch.einsum('ij,j->i', a, b)\n",
                     "import inspect\n", "f = inspect.currentframe()\n", "f = sys._getframe(1)\n",
                     "v = frame.f_locals\n", "g = globals()\n", "l = locals()\n"]:
            with self.subTest(code=code):
                self.assertBanned(code)

    def test_numpy_is_caught_as_computation_outside_triton(self):
        for code in ["import numpy as np\n", "import numpy\n", "from numpy import matmul\n",
                     "a = A.view(torch.int16).numpy()\n", "a = A.numpy ()\n"]:
            with self.subTest(code=code):
                self.assertBanned(code)
                self.assertIn("outside Triton", core.ban_check(code))
        # A mention, a name that merely contains it, or Triton's own numpy-like API is not.
        for code in ["# unlike numpy, this runs on the device\n", "numpy_like = 1\n", "y = tl.sum(x, axis=0)\n",
                     "import numpyish\n"]:
            with self.subTest(code=code):
                self.assertIsNone(core.ban_check(code))

    def test_comments_and_docstrings_are_ignored(self):
        code = ('"""Replaces torch.matmul(a, b) with a Triton kernel."""\n'
                "import torch\n"
                "# we do not call torch.nn.functional.relu(x) here\n"
                "def kernel_function(a, b):\n"
                "    '''Equivalent to a.mm(b).'''\n"
                "    return a  # not torch.mm(a, b)\n")
        self.assertIsNone(core.ban_check(code))

    def test_triton_code_is_allowed(self):
        with open(support.os.path.join(support.MATVEC, "input.py")) as f:
            self.assertIsNone(core.ban_check(f.read()))
        self.assertIsNone(core.ban_check("acc += tl.dot(a, b)\ny = tl.sum(x * x, axis=0)\n"))

    def test_invalid_python_is_still_checked(self):
        self.assertBanned("def broken(:\n    torch.matmul(a, b)\n")


if __name__ == "__main__":
    unittest.main()
