"""The shared launcher cache (launchers.py): a worker loads only the build of the very source its own
Triton generated, and the judge takes only well-formed, bounded reports. A plain C extension stands in
for a Triton launcher (the CPU platform's interpreter builds none); the lookup is the same code."""
import os
import sysconfig
import tempfile
import threading
import unittest

import support  # noqa: F401 - sys.path and the CPU platform
import launchers
import triton.runtime.build as build

SRC = """
#include <Python.h>
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "%s", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_%s(void) { PyObject* m = PyModule_Create(&def);
  if (m) PyModule_AddIntConstant(m, "answer", %d); return m; }
"""


def source(name, answer):
    return SRC % (name, name, answer)


def compile_into(directory, name, src):
    """Builds `src` as the judge's builder would and files it under its key."""
    work = tempfile.mkdtemp(dir=directory)
    path = os.path.join(work, name + ".c")
    with open(path, "w") as f:
        f.write(src)
    so = build._build(name, path, work, [], [sysconfig.get_paths()["include"]], [], [])
    dest = os.path.join(directory, launchers._key(build, src))
    os.makedirs(dest, exist_ok=True)
    os.rename(so, os.path.join(dest, name + launchers.SUFFIX))


@unittest.skipUnless(os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")), "no Python.h")
class SharedLookupTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.shared = os.path.join(self.tmp.name, "shared")
        os.makedirs(self.shared)
        self.saved = build.compile_module_from_src
        self.cache = os.environ.get("TRITON_CACHE_DIR")
        os.environ["TRITON_CACHE_DIR"] = os.path.join(self.tmp.name, "own")

    def tearDown(self):
        build.compile_module_from_src = self.saved
        if self.cache is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = self.cache
        self.tmp.cleanup()

    def test_the_shared_build_of_the_same_source_is_loaded_and_nothing_else(self):
        compile_into(self.shared, "kagent_probe_a", source("kagent_probe_a", 7))
        lookup = launchers.SharedLookup(self.shared)
        include = [sysconfig.get_paths()["include"]]
        mod = build.compile_module_from_src(source("kagent_probe_a", 7), "kagent_probe_a", include_dirs=include)
        self.assertEqual(mod.answer, 7)
        self.assertEqual(lookup.hits, 1)
        self.assertEqual(lookup.take(), [])  # nothing compiled here
        # The attack: a module planted under the key of another source is never what a process asks
        # for; a different source is compiled by the process itself and reported for sharing.
        compile_into(self.shared, "kagent_probe_b", source("kagent_probe_b", 666))
        other = source("kagent_probe_b", 8)
        mod = build.compile_module_from_src(other, "kagent_probe_b", include_dirs=include)
        self.assertEqual(mod.answer, 8)
        self.assertEqual(lookup.hits, 1)
        self.assertEqual(lookup.take(), [{"name": "kagent_probe_b", "src": other}])


TEST_PY = """
import sys, sysconfig
import triton.runtime.build as build
src = open("probe.c").read()
mod = build.compile_module_from_src(src, "kagent_probe_t", include_dirs=[sysconfig.get_paths()["include"]])
print("answer", mod.answer)
print("from", mod.__file__)
print("PASS")
"""


@unittest.skipUnless(os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")), "no Python.h")
class StandbyTest(unittest.TestCase):
    """test.py's standby (test_standby.py --launchers): the test's own Triton looks launchers up in the
    judge's shared directory first, and loads only the build of the source it generated itself."""

    def run_standby(self, tmp, launcher_dir, src):
        import subprocess
        import sys
        work = os.path.join(tmp, "work")
        os.makedirs(work)
        with open(os.path.join(work, "probe.c"), "w") as f:
            f.write(src)
        test = os.path.join(tmp, "kdir", "test.py")
        os.makedirs(os.path.dirname(test))
        with open(test, "w") as f:
            f.write(TEST_PY)
        env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(tmp, "own"))
        argv = [sys.executable, os.path.join(support.HARNESS, "test_standby.py"), "--dir", work, "--test", test,
                "--idle-s", "60"] + (["--launchers", launcher_dir] if launcher_dir else [])
        proc = subprocess.Popen(argv, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        open(os.path.join(work, "go"), "w").close()
        out, _ = proc.communicate(timeout=120)
        return proc.returncode, out

    def outcome(self, planted, asked, pass_dir=True):
        """test.py asks for the module of answer `asked` with one of answer `planted` in the shared
        directory; returns the test's output and the directory."""
        with tempfile.TemporaryDirectory() as tmp:
            shared = os.path.join(tmp, "shared")
            os.makedirs(shared)
            compile_into(shared, "kagent_probe_t", source("kagent_probe_t", planted))
            rc, out = self.run_standby(tmp, shared if pass_dir else None, source("kagent_probe_t", asked))
            self.assertEqual(rc, 0, out)
            self.assertIn(f"answer {asked}", out)
            return out, shared

    def test_the_users_test_loads_the_shared_build_of_its_own_source(self):
        out, shared = self.outcome(7, 7)
        self.assertIn("from " + shared, out)

    def test_a_planted_module_under_another_source_is_not_loaded(self):
        out, shared = self.outcome(666, 8)
        self.assertNotIn("from " + shared, out)

    def test_without_the_option_nothing_is_looked_up(self):
        out, shared = self.outcome(7, 7, pass_dir=False)
        self.assertNotIn("from " + shared, out)


class PrepareTest(unittest.TestCase):
    """launchers.prepare_triton(compile_probe=True), as both standbys call it: Triton's compiler is
    warmed up (a harness kernel compiled for an NVIDIA target, which needs no device) while CUDA is
    never initialised: no torch.cuda query, no device count (the CUDA driver initialised before the
    test would keep a test.py that forks from using CUDA in its children, and a query through
    Triton's JIT created a 518 MiB context in each waiting standby on an H100)."""

    def test_the_host_probe_compiles_without_initialising_cuda(self):
        import subprocess
        import sys
        import torch
        if torch.version.cuda is None:
            self.skipTest("a torch without CUDA: the NVIDIA preparation is skipped")
        # A process of its own, as a standby is: Triton imported without the cpu platform's interpreter.
        script = (
            "import json, sys, torch\n"
            "sys.path.insert(0, sys.argv[1])\n"
            "touched = []\n"
            "def trap(name):\n"
            "    def f(*a, **k):\n"
            "        touched.append(name)\n"
            "        raise AssertionError(name + ' called')\n"
            "    return f\n"
            "for owner, name in [(torch.cuda, 'is_available'), (torch.cuda, 'init'), (torch.cuda, 'current_device'),\n"
            "                    (torch.cuda, 'get_device_capability'), (torch._C, '_cuda_getDeviceCount')]:\n"
            "    setattr(owner, name, trap(name))\n"
            "import launchers\n"
            "launchers.prepare_triton(None, compile_probe=True)\n"
            "print(json.dumps({'touched': touched, 'probe': launchers.PREPARED.get('probe'),\n"
            "                  'initialized': torch.cuda.is_initialized()}))\n")
        with tempfile.TemporaryDirectory() as tmp:
            env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "KAGENT_STANDBY_PREPARE")}
            env["TRITON_CACHE_DIR"] = tmp
            proc = subprocess.run([sys.executable, "-c", script, support.HARNESS], env=env, capture_output=True,
                                  text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        import json
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        self.assertEqual(got, {"touched": [], "probe": True, "initialized": False}, proc.stderr[-3000:])

    def test_knob_off_does_nothing(self):
        os.environ["KAGENT_STANDBY_PREPARE"] = "0"
        try:
            self.assertIsNone(launchers.prepare_triton("/nonexistent", compile_probe=True))
            self.assertEqual(launchers.PREPARED, {})
        finally:
            del os.environ["KAGENT_STANDBY_PREPARE"]


class OfferTest(unittest.TestCase):
    def test_malformed_or_oversized_reports_start_no_build(self):
        with tempfile.TemporaryDirectory() as tmp:
            cache = launchers.LauncherCache(os.path.join(tmp, "shared"), ["false", "--"])
            before = threading.active_count()
            cache.offer("not a list")
            cache.offer([{"name": "../evil", "src": "x"}, {"name": 3, "src": "x"},
                         {"name": "big", "src": "x" * (launchers.MAX_SOURCE_BYTES + 1)}, "junk"])
            self.assertEqual(threading.active_count(), before)
            self.assertEqual((cache.pending, cache.built, cache.failed), (set(), 0, 0))
            self.assertTrue(os.path.isdir(cache.dir))
            # the shared directory is not under the build directory the builder may write
            self.assertFalse(cache.dir.startswith(cache.work))


if __name__ == "__main__":
    unittest.main()


class JudgeSharesOnlyWhereTold(unittest.TestCase):
    """The runtime owns the shared directory's name and the rule for sharing (device_backend.hpp,
    launchers_shareable): the judge shares launchers only in the `launchers_dir` load_problem names,
    and only where its workers' prefix is bwrap (the read-only bind needs it)."""

    def judge(self, prefix):
        import judge as judge_mod
        tmp = tempfile.mkdtemp()
        jd = judge_mod.Judge(tmp)
        jd.gpu = True  # the rule under test, not a device
        jd.sandbox_prefix = list(prefix)
        return jd, tmp

    def test_no_directory_no_sharing_and_a_named_one_is_bound_read_only(self):
        bwrap = ["/usr/bin/bwrap", "--unshare-all", "--"]
        jd, tmp = self.judge(bwrap)
        self.assertIsNone(jd.shared_launchers(None), "the runtime did not ask")
        self.assertEqual(jd.sandbox_prefix, bwrap)
        shared = os.path.join(tmp, "workers", "gpu0", "launchers", "shared")
        cache = jd.shared_launchers(shared)
        self.assertIsNotNone(cache)
        self.assertEqual(cache.dir, shared)
        self.assertTrue(os.path.isdir(shared))
        self.assertFalse(cache.work.startswith(shared + os.sep), "builds happen outside what workers read")
        cut = jd.sandbox_prefix.index("--")
        self.assertEqual(jd.sandbox_prefix[cut - 3:cut], ["--ro-bind", shared, shared])

    def test_without_bwrap_the_named_directory_is_not_shared(self):
        for prefix in ([], ["prlimit", "--as=1", "--"]):
            jd, tmp = self.judge(prefix)
            self.assertIsNone(jd.shared_launchers(os.path.join(tmp, "shared")), prefix)
            self.assertEqual(jd.sandbox_prefix, prefix)
