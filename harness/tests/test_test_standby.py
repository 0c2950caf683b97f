"""harness/test_standby.py's end: the exit status and output of the user's test.py are what `python
test.py` gives, with the fast exit (KAGENT_FAST_EXIT, default on) as without it."""
import os
import subprocess
import sys
import tempfile
import unittest

import support

# One test.py, told what to do by its environment: an exit status after an atexit handler and a
# non-daemon thread that both print late; an uncaught exception; SystemExit with a message.
TEST_PY = r"""
import atexit, os, sys, threading, time
how = os.environ["HOW"]
if how == "status":
    atexit.register(lambda: print("atexit ran", flush=True))
    import ctypes
    libc = ctypes.CDLL(None)
    libc.printf(b"from C\n")  # buffered by C's stdio (stdout is a pipe), not by Python's
    def late():
        time.sleep(0.3)
        print("thread ended", flush=True)
    threading.Thread(target=late).start()
    print("PASS", flush=True)
    sys.exit(3)
if how == "raise":
    raise ValueError("the test broke")
sys.exit("FAIL: a message to stderr")
"""


class ExitStatus(unittest.TestCase):
    def test_the_tests_status_output_handlers_and_threads_survive_the_fast_exit(self):
        with tempfile.TemporaryDirectory() as tmp:
            test = os.path.join(tmp, "kdir", "test.py")
            os.makedirs(os.path.dirname(test))
            with open(test, "w") as f:
                f.write(TEST_PY)
            cases = [("status", "1"), ("status", "0"), ("raise", "1"), ("message", "1")]
            procs = []
            for how, fast in cases:
                work = os.path.join(tmp, f"{how}_{fast}")
                os.makedirs(work)
                env = dict(os.environ, HOW=how, KAGENT_FAST_EXIT=fast, KAGENT_TEST_TRACE="1",
                           TRITON_CACHE_DIR=os.path.join(work, "triton"))
                env.pop("PYTHONUNBUFFERED", None)  # which would make C's stdout unbuffered too
                argv = [sys.executable, os.path.join(support.HARNESS, "test_standby.py"), "--dir", work, "--test",
                        test, "--idle-s", "120"]
                procs.append(subprocess.Popen(argv, cwd=work, env=env, stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE, text=True))
                open(os.path.join(work, "go"), "w").close()
            got = {}
            for (how, fast), p in zip(cases, procs):
                out, err = p.communicate(timeout=240)
                got[(how, fast)] = (p.returncode, out, err)
        for fast in ("1", "0"):
            rc, out, err = got[("status", fast)]
            self.assertEqual(rc, 3, (fast, out, err))
            lines = out.splitlines()
            self.assertIn("from C", lines, (fast, out, err))
            lines.remove("from C")  # C's buffer is flushed at the very end, after Python's lines
            self.assertEqual(lines, ["PASS", "thread ended", "atexit ran"], (fast, out, err))
        # The fast exit is what ended the process (the stamp after the handlers), not the slow one.
        self.assertIn("atexit done", got[("status", "1")][2])
        self.assertNotIn("atexit done", got[("status", "0")][2])
        rc, out, err = got[("raise", "1")]
        self.assertEqual(rc, 1, err)
        self.assertIn("ValueError: the test broke", err)
        self.assertIn("Traceback", err)
        rc, out, err = got[("message", "1")]
        self.assertEqual(rc, 1, err)
        self.assertIn("FAIL: a message to stderr", err)


if __name__ == "__main__":
    unittest.main()
