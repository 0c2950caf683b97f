// The device backends on the cpu platform (Triton's interpreter, the examples' small shapes): the
// warm evaluator server and the process-per-request backend verify, time and hash real kernels, and
// report wrong, broken and hanging kernels as failures of that request only.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "platform/common/env.hpp"
#include "platform/device/device_backend.hpp"
#include "platform/process/sandbox.hpp"

namespace fs = std::filesystem;
using namespace kagent;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const fs::path kMatvec = fs::path(KAGENT_SOURCE_DIR) / "examples/optimize_01_matvec";

struct scratch {
  fs::path dir = fs::temp_directory_path() / ("kagent_device_" + std::to_string(::getpid()) + "_" +
                                              std::to_string(reinterpret_cast<std::uintptr_t>(this)));
  scratch() { fs::create_directories(dir); }
  ~scratch() { fs::remove_all(dir); }
};

device_settings cpu_settings(const scratch& s, const std::string& isolation) {
  device_settings d;
  d.python = KAGENT_PYTHON;
  d.install_root = KAGENT_SOURCE_DIR;
  d.problem_path = (kMatvec / "problem.py").string();
  d.run_path = s.dir.string();
  d.child_env = current_environment();
  d.verifier = "cpu";
  d.isolation = isolation;
  d.test_timeout_s = 120;
  d.benchmark_timeout_s = 120;
  d.benchmark_warmup = 1;
  d.benchmark_repeat = 3;
  // torch.compile of the reference is inductor's C++ build on this platform (seconds of two shared
  // cores at every start check); CpuRun.BeamSearchOnMatvec... times it end to end.
  d.compile_reference = false;
  return d;
}

std::string wrong_kernel() {
  // Writes half of y only: the poisoned rest must fail verification.
  std::string code = slurp(kMatvec / "input.py");
  const std::string from = "grid = (triton.cdiv(M, BLOCK_M),)";
  code.replace(code.find(from), from.size(), "grid = (triton.cdiv(M, BLOCK_M) // 2,)");
  return code;
}

class DeviceBackendCpu : public ::testing::TestWithParam<std::string> {};

TEST_P(DeviceBackendCpu, VerifiesTimesAndHashesAndIsolatesFailures) {
  scratch s;
  auto backend = make_device_backend(cpu_settings(s, GetParam()));
  const auto good = slurp(kMatvec / "input.py");
  const auto work = (s.dir / "c0").string();
  fs::create_directories(work);

  auto init = backend->run({"initial", good, device_mode::initial, work});
  ASSERT_TRUE(init.verified) << init.error << "\n" << init.stderr_tail;
  EXPECT_TRUE(init.benchmarked);
  EXPECT_GT(init.time_ms, 0);
  EXPECT_FALSE(init.code_hash.empty());
  // Its references are timed by its later checks (no test.py here: the settings name none).
  auto checks = backend->run({"initial", good, device_mode::start_checks, work});
  EXPECT_FALSE(checks.failure_cause) << checks.error;
  EXPECT_GT(checks.eager_ms, 0);
  EXPECT_FALSE(checks.user_tested);

  auto bad = backend->run({"c1", wrong_kernel(), device_mode::verify, work});
  EXPECT_FALSE(bad.verified);
  EXPECT_EQ(bad.failure_cause, failure_kind::verification) << bad.error;
  EXPECT_FALSE(bad.error.empty());

  auto broken = backend->run({"c2", "def kernel_function(:\n", device_mode::verify, work});
  EXPECT_FALSE(broken.verified);
  EXPECT_NE(broken.error.find("SyntaxError"), std::string::npos) << broken.error;

  // The device session survives its failed requests: the good kernel still verifies and times.
  device_request again_req{"c3", good, device_mode::verify, work};
  again_req.hash_after_verify = true;  // the hash comes with the verdict
  auto again = backend->run(again_req);
  EXPECT_TRUE(again.verified) << again.error;
  if (GetParam() == "warm") {  // (isolation: process hashes with the benchmark)
    EXPECT_TRUE(again.hashed_after_verify);
    EXPECT_EQ(again.code_hash, init.code_hash);
  }
  auto timed = backend->run({"c3", good, device_mode::benchmark, work});
  EXPECT_TRUE(timed.benchmarked) << timed.error;
  EXPECT_EQ(timed.code_hash, init.code_hash);  // the same code hashes alike (dedup)
  // Nothing of the children outside the run directory: their TMPDIR is under workers/gpu0/.
  EXPECT_TRUE(fs::is_directory(s.dir / "workers/gpu0/tmp"));
  if (GetParam() != "warm") return;
  // Where each step's time went: one line per step, each evaluator request with the judge's split.
  std::ifstream f(fs::path(work) / "device_steps.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string l; std::getline(f, l);) lines.push_back(nlohmann::json::parse(l));
  ASSERT_EQ(lines.size(), 6u);  // initial, start_checks, c1, c2, c3 verify, c3 benchmark
  EXPECT_EQ(lines[0]["mode"], "initial");
  EXPECT_EQ(lines[1]["mode"], "start_checks");
  const auto& verified = lines[4];
  EXPECT_EQ(verified["mode"], "verify");
  ASSERT_EQ(verified["steps"].size(), 1u);
  EXPECT_EQ(verified["steps"][0]["op"], "verify");
  EXPECT_TRUE(verified["steps"][0]["split"].contains("first_call_s")) << verified.dump();
  EXPECT_GT(verified["wall_s"].get<double>(), 0);
  const auto& bench = lines[5];
  EXPECT_EQ(bench["mode"], "benchmark");
  EXPECT_EQ(bench["steps"][0]["op"], "benchmark");
  EXPECT_TRUE(bench["steps"][0]["split"].contains("timed_loop_s")) << bench.dump();
  // The hash comes with the verdict and the timing: no request of its own (a round trip each).
  for (const auto& l : lines)
    for (const auto& st : l["steps"])
      if (l["mode"] != "start_checks") {
        EXPECT_NE(st["op"], "hash") << l.dump();
      }
  EXPECT_EQ(bench["steps"].size(), 1u) << bench.dump();
}

// user_test: best. Two candidates were sent while the starting kernel was the best (their bar: none
// here), and wait for the device in turn. The first is fast and passes test.py, and the manager records
// it as the best (recorded_best_ms). The second is slower than that, so it can no longer become the best,
// and its test.py run (seconds of device time on a GPU, for a real test.py) is skipped. Before any
// best is recorded, the request's own bar decides, except for a program that passed test.py here.
TEST_P(DeviceBackendCpu, UserTestSkipsACandidateThatTheRecordedBestAlreadyBeats) {
  // The bar is one function both backends call (wants_user_test); the warm backend proves it, and the
  // process backend's run of it (48 s on a loaded 2-core CI machine) kept the suite over 15 minutes.
  if (GetParam() == "process") GTEST_SKIP() << "wants_user_test is shared; tested with the warm backend";
  scratch s;
  const auto count = s.dir / "test_runs.txt";
  const auto test_py = s.dir / "test.py";
  std::ofstream(test_py) << "with open(" << count << ", 'a') as f:\n    f.write('run\\n')\nprint('PASS')\n";
  auto settings = cpu_settings(s, GetParam());
  settings.user_test = "best";
  settings.test_path = test_py.string();
  auto recorded = std::make_shared<std::atomic<double>>(not_measured);
  settings.recorded_best_ms = recorded;
  const auto fast = slurp(kMatvec / "input.py");
  // The same kernel, 100 ms slower per call (30 ms was within the noise of a loaded 2-core machine,
  // where the interpreted kernel itself takes about 100 ms).
  auto slow = fast;
  const std::string ret = "    return y\n";
  slow.replace(slow.rfind(ret), ret.size(), "    import time\n    time.sleep(0.1)\n    return y\n");
  auto runs = [&] {
    std::ifstream f(count);
    return static_cast<int>(std::count(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>(), '\n'));
  };
  auto backend = make_device_backend(settings);
  auto timed = [&](const std::string& id, const std::string& code) {
    const auto work = (s.dir / id).string();
    fs::create_directories(work);
    auto v = backend->run({id, code, device_mode::verify, work});
    EXPECT_TRUE(v.verified) << v.error;
    return backend->run({id, code, device_mode::benchmark, work});  // best_ms: none known when it was sent
  };
  auto first = timed("c1", fast);
  ASSERT_TRUE(first.benchmarked) << first.error;
  EXPECT_TRUE(first.user_tested) << first.error << first.stderr_tail;
  EXPECT_EQ(runs(), 1);
  // The same program again (a comment differs): it passed test.py on this device already, so this
  // duplicate runs none, although nothing is recorded yet and its bar is none.
  auto duplicate = timed("c1b", fast + "\n# the same program, another comment\n");
  ASSERT_TRUE(duplicate.benchmarked) << duplicate.error;
  EXPECT_EQ(duplicate.code_hash, first.code_hash);
  EXPECT_FALSE(duplicate.user_tested);
  EXPECT_EQ(runs(), 1) << "test.py ran again for a program that passed it on this device";
  auto unrecorded = timed("c2", slow);  // nothing recorded yet: the request's bar (none) decides
  EXPECT_TRUE(unrecorded.user_tested) << unrecorded.error;
  EXPECT_EQ(runs(), 2);
  recorded->store(first.time_ms);  // what the manager does when it records c1 as the new best
  auto second = timed("c3", slow);
  ASSERT_TRUE(second.benchmarked) << second.error;
  ASSERT_GT(second.time_ms, first.time_ms);
  EXPECT_FALSE(second.user_tested) << second.time_ms << " ms after " << first.time_ms << " ms";
  EXPECT_EQ(second.user_test_s, 0.0);
  EXPECT_EQ(runs(), 2) << "test.py ran for a candidate slower than the recorded best";
}

// The cpu platform never lends its processes a GPU the machine has: the examples' test.py (and users'
// own) pick CUDA when torch sees it, and would then interpret the full problem on device tensors.
TEST_P(DeviceBackendCpu, TheUsersTestSeesNoGpuOnTheCpuPlatform) {
  scratch s;
  const auto test_py = s.dir / "test.py";
  std::ofstream(test_py) << "import os, sys\n"
                            "seen = {k: os.environ.get(k) for k in ('CUDA_VISIBLE_DEVICES', 'HIP_VISIBLE_DEVICES',"
                            " 'ROCR_VISIBLE_DEVICES', 'TRITON_INTERPRET')}\n"
                            "print(seen)\n"
                            "ok = seen == {'CUDA_VISIBLE_DEVICES': '', 'HIP_VISIBLE_DEVICES': '',"
                            " 'ROCR_VISIBLE_DEVICES': None, 'TRITON_INTERPRET': '1'}\n"
                            "print('PASS' if ok else 'FAIL: a GPU is visible')\n"
                            "sys.exit(0 if ok else 1)\n";
  auto settings = cpu_settings(s, GetParam());
  settings.user_test = "best";
  settings.test_path = test_py.string();
  // As on a GPU host: the parent environment offers devices.
  settings.child_env["CUDA_VISIBLE_DEVICES"] = "0";
  settings.child_env["HIP_VISIBLE_DEVICES"] = "0";
  settings.child_env["ROCR_VISIBLE_DEVICES"] = "0";
  auto backend = make_device_backend(settings);
  const auto work = (s.dir / "c0").string();
  fs::create_directories(work);
  auto init = backend->run({"initial", slurp(kMatvec / "input.py"), device_mode::start_checks, work});
  EXPECT_FALSE(init.failure_cause) << init.error << "\n" << init.stderr_tail;
  EXPECT_TRUE(init.user_tested) << init.error;
  EXPECT_EQ(init.error.find("a GPU is visible"), std::string::npos) << init.error;
}

// test.py in a process started ahead (harness/test_standby.py): it sees what `python test.py` in the
// candidate's directory would (argv, sys.path[0], __main__, kernel.py in its cwd, no harness module on
// its path), a failing or hanging test fails as a fresh one does, each test gets a process of its own,
// on the cpu platform, unless KAGENT_TEST_STANDBY is 1 or more, every test runs fresh, and with two
// waiting a used one is replaced at once.
TEST(DeviceBackendStandby, TheUsersTestRunsAheadAsItWouldFresh) {
  scratch s;
  const auto test_py = s.dir / "kdir" / "test.py";
  fs::create_directories(test_py.parent_path());
  std::ofstream(test_py) << "import importlib.util, os, sys\n"
                            "print('argv0', sys.argv[0])\n"
                            "print('path0', sys.path[0])\n"
                            "sys.path.insert(0, os.getcwd())\n"
                            "import kernel\n"
                            "print('name', __name__)\n"
                            "print('harness visible', importlib.util.find_spec('harness_core') is not None)\n"
                            "print('pid', os.getpid())\n"
                            "mode = getattr(kernel, 'MODE', 'pass')\n"
                            "if mode == 'hang':\n    import time\n    time.sleep(300)\n"
                            "if mode == 'fail':\n    print('FAIL: wrong on shape 7')\n    sys.exit(1)\n"
                            "print('PASS')\n";
  auto settings = cpu_settings(s, "warm");
  settings.user_test = "every";
  settings.test_path = test_py.string();
  settings.user_test_timeout_s = 8;
  settings.child_env["KAGENT_TEST_STANDBY"] = "1";  // the cpu platform's default is off
  const auto good = slurp(kMatvec / "input.py");
  auto backend = make_device_backend(settings);
  auto run_test = [&](const std::string& id, const std::string& code) {
    const auto work = s.dir / id;
    fs::create_directories(work);
    auto r = backend->run({id, code, device_mode::start_checks, work.string()});
    return std::make_pair(r, slurp(work / "user_test.log"));
  };
  const std::string ahead = "in a process started ahead";
  auto [passed, log] = run_test("c0", good);
  EXPECT_TRUE(passed.user_tested) << passed.error << "\n" << log;
  EXPECT_NE(log.find(ahead), std::string::npos) << log;
  EXPECT_NE(log.find("argv0 " + test_py.string()), std::string::npos) << log;
  EXPECT_NE(log.find("path0 " + fs::canonical(test_py.parent_path()).string()), std::string::npos) << log;
  EXPECT_NE(log.find("name __main__"), std::string::npos) << log;
  EXPECT_NE(log.find("harness visible False"), std::string::npos) << log;
  const auto pid_of = [](const std::string& l) {
    const auto at = l.find("pid ");
    return at == std::string::npos ? std::string{"none"} : l.substr(at, l.find('\n', at) - at);
  };
  auto [failed, flog] = run_test("c1", good + "\nMODE = 'fail'\n");
  EXPECT_FALSE(failed.user_tested);
  EXPECT_EQ(failed.failure_cause, failure_kind::user_test);
  EXPECT_NE(failed.error.find("exit 1"), std::string::npos) << failed.error;
  EXPECT_NE(failed.error.find("FAIL: wrong on shape 7"), std::string::npos) << failed.error;
  EXPECT_NE(flog.find(ahead), std::string::npos) << flog;
  EXPECT_NE(pid_of(log), pid_of(flog)) << "two tests shared a process";
  auto [hung, hlog] = run_test("c2", good + "\nMODE = 'hang'\n");
  EXPECT_EQ(hung.failure_cause, failure_kind::user_test);
  EXPECT_NE(hung.error.find("timed out after 8."), std::string::npos) << hung.error;
  EXPECT_NE(hlog.find(ahead), std::string::npos) << hlog;
  // A device step later, the next test has its process again.
  auto [again, alog] = run_test("c3", good);
  EXPECT_TRUE(again.user_tested) << again.error << "\n" << alog;
  EXPECT_NE(alog.find(ahead), std::string::npos) << alog;
  backend.reset();
  // Nothing of the processes started ahead is left in the run directory.
  for (const auto& e : fs::directory_iterator(s.dir / "workers" / "gpu0"))
    EXPECT_EQ(e.path().filename().string().rfind("user_test_", 0), std::string::npos) << e.path();

  settings.child_env.erase("KAGENT_TEST_STANDBY");  // the cpu platform's default: fresh
  backend = make_device_backend(settings);
  auto [fresh, frlog] = run_test("c4", good);
  EXPECT_TRUE(fresh.user_tested) << fresh.error << "\n" << frlog;
  EXPECT_EQ(frlog.find(ahead), std::string::npos) << frlog;
  EXPECT_NE(frlog.find("name __main__"), std::string::npos) << frlog;
  backend.reset();

  // Two waiting (a GPU platform's default): a used one is replaced at once, so a test right after
  // another finds one that has been importing since before the first.
  settings.child_env["KAGENT_TEST_STANDBY"] = "2";
  backend = make_device_backend(settings);
  auto waiting = [&] {
    int n = 0;
    for (const auto& e : fs::directory_iterator(s.dir / "workers" / "gpu0"))
      n += e.path().filename().string().rfind("user_test_", 0) == 0;
    return n;
  };
  backend->prepare();
  EXPECT_EQ(waiting(), 2);
  auto [first, flog2] = run_test("c5", good);
  EXPECT_TRUE(first.user_tested) << first.error << "\n" << flog2;
  EXPECT_NE(flog2.find(ahead), std::string::npos) << flog2;
  EXPECT_EQ(waiting(), 2) << "the one used is replaced";
  backend.reset();
  EXPECT_EQ(waiting(), 0);
}

// The judge's shared launcher directory in processes started ahead (test.py's standby, the profiler's):
// only on NVIDIA under bwrap, bound read-only before the prefix's own "--".
TEST(SharedLaunchers, OnlyOnNvidiaUnderBwrapAndBoundReadOnly) {
  env_map env;
  EXPECT_TRUE(launchers_shareable("nvidia", "bwrap", env));
  EXPECT_FALSE(launchers_shareable("rocm", "bwrap", env));
  EXPECT_FALSE(launchers_shareable("", "bwrap", env));
  EXPECT_FALSE(launchers_shareable("nvidia", "rlimits", env)) << "a candidate could write the directory";
  EXPECT_FALSE(launchers_shareable("nvidia", "off", env));
  env["KAGENT_SHARED_LAUNCHERS"] = "0";
  EXPECT_FALSE(launchers_shareable("nvidia", "bwrap", env));
  EXPECT_EQ(shared_launcher_dir("/r", 3), "/r/workers/gpu3/launchers/shared");
  const std::vector<std::string> prefix{"bwrap", "--ro-bind", "/", "/", "--bind", "{scratch}", "{scratch}", "--",
                                        "prlimit", "--", "x"};
  const std::vector<std::string> want{"bwrap", "--ro-bind", "/", "/", "--bind", "{scratch}", "{scratch}",
                                      "--ro-bind", "/s", "/s", "--", "prlimit", "--", "x"};
  EXPECT_EQ(with_readonly_bind(prefix, "/s"), want);
  EXPECT_EQ(with_readonly_bind({"prlimit", "--cpu=5"}, "/s"), (std::vector<std::string>{"prlimit", "--cpu=5"}));
}

// The attack first: a candidate whose test.py run (in a standby given the judge's launchers) tries to
// plant a module in the shared directory, where the judge's next workers would look. Under bwrap the
// directory is read-only there; the test still sees it and its Triton looks launchers up in it.
TEST(SharedLaunchers, TheUsersTestCannotWriteTheJudgesLaunchers) {
  if (!probe_bwrap().ok) GTEST_SKIP() << "bwrap does not work here: " << probe_bwrap().why;
  scratch s;
  const auto test_py = s.dir / "kdir" / "test.py";
  fs::create_directories(test_py.parent_path());
  std::ofstream(test_py) << "import os, sys\n"
                            "args = open('/proc/self/cmdline', 'rb').read().split(b'\\0')\n"
                            "shared = args[args.index(b'--launchers') + 1].decode()\n"
                            "import triton.runtime.build as build\n"
                            "print('hooked', hasattr(build.compile_module_from_src, 'kagent_original'))\n"
                            "print('shared exists', os.path.isdir(shared))\n"
                            "try:\n"
                            "    os.makedirs(os.path.join(shared, 'planted'))\n"
                            "    print('planted')\n"
                            "except OSError as e:\n"
                            "    print('refused', e.errno)\n"
                            "print('PASS')\n";
  auto settings = cpu_settings(s, "warm");
  settings.user_test = "every";
  settings.test_path = test_py.string();
  settings.child_env["KAGENT_TEST_STANDBY"] = "1";
  settings.vendor = "nvidia";  // what decides the sharing; the evaluation stays on the cpu platform
  sandbox_request r;
  r.writable = {"{scratch}"};
  r.readable = {test_py.parent_path().string(), KAGENT_SOURCE_DIR};
  r.readable.push_back(fs::path(KAGENT_PYTHON).parent_path().parent_path().string());
  const auto plan = plan_sandbox("bwrap", r);
  settings.sandbox_prefix = plan.prefix;
  settings.sandbox_mode = plan.mode;
  fs::create_directories(s.dir / "workers");
  auto backend = make_device_backend(settings);
  const auto work = s.dir / "c0";
  fs::create_directories(work);
  auto res = backend->run({"c0", slurp(kMatvec / "input.py"), device_mode::start_checks, work.string()});
  const auto log = slurp(work / "user_test.log");
  EXPECT_TRUE(res.user_tested) << res.error << "\n" << log;
  EXPECT_NE(log.find("in a process started ahead"), std::string::npos) << log;
  EXPECT_NE(log.find("hooked True"), std::string::npos) << log;
  EXPECT_NE(log.find("shared exists True"), std::string::npos) << log;
  EXPECT_NE(log.find("refused"), std::string::npos) << log;
  EXPECT_EQ(log.find("planted"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(fs::path(shared_launcher_dir(s.dir.string(), 0)) / "planted"));
  backend.reset();
}

INSTANTIATE_TEST_SUITE_P(Isolation, DeviceBackendCpu, ::testing::Values("warm", "process"));

// The starting kernel's reference timings are kept across runs (harness/reference_cache.py): a second
// run of the same problem on the same machine and loop reads PyTorch eager's time and says so.
TEST(DeviceBackendWarm, PyTorchReferenceTimingsAreKeptForTheNextRun) {
  scratch s;
  auto settings = cpu_settings(s, "warm");
  settings.reference_cache_dir = (s.dir / "cache" / "references").string();
  const auto good = slurp(kMatvec / "input.py");
  auto checks = [&](const device_settings& st, const std::string& id) {
    const auto work = s.dir / id;
    fs::create_directories(work);
    auto r = make_device_backend(st)->run({id, good, device_mode::start_checks, work.string()});
    std::ifstream f(work / "device_steps.jsonl");
    nlohmann::json refs;
    std::string all;
    for (std::string line; std::getline(f, line); all += line + "\n") {
      const auto parsed = nlohmann::json::parse(line);
      for (const auto& step : parsed["steps"])
        if (step["op"] == "references") refs = step;
    }
    EXPECT_TRUE(refs.is_object()) << "no references step in device_steps.jsonl:\n" << all;
    return std::make_pair(r, refs);
  };
  auto [first, first_step] = checks(settings, "run1");
  ASSERT_FALSE(first.failure_cause) << first.error;
  EXPECT_GT(first.eager_ms, 0);
  EXPECT_EQ(first.references_cached_at, "");
  EXPECT_EQ(first_step["split"]["hit"], false) << first_step.dump();
  ASSERT_EQ(std::distance(fs::directory_iterator(settings.reference_cache_dir), fs::directory_iterator{}), 1);

  auto [second, second_step] = checks(settings, "run2");  // a new backend: another run's judge
  ASSERT_FALSE(second.failure_cause) << second.error;
  EXPECT_EQ(second.eager_ms, first.eager_ms);
  EXPECT_FALSE(second.references_cached_at.empty());
  EXPECT_EQ(second_step["split"]["hit"], true) << second_step.dump();

  // Another loop (another key) and no cache at all: test_server.ReferenceCache, in one server.
}

// KAGENT_NOOP_DEVICE_S: a noop device holds each request that long (benchmarks of the runtime's scaling
// with a fixed device time); the warm-up at a run's start does not wait, and neither does the unset case.
TEST(DeviceBackendNoop, SimulatesAFixedDeviceTimePerRequest) {
  scratch s;
  auto d = cpu_settings(s, "warm");
  d.verifier = "noop";
  auto backend = make_device_backend(d);
  ::setenv("KAGENT_NOOP_DEVICE_S", "0.2", 1);
  auto v = backend->run({"c0", "anything", device_mode::verify, s.dir.string()});
  auto b = backend->run({"c0", "anything", device_mode::benchmark, s.dir.string()});
  auto w = backend->run({"", "", device_mode::warm, s.dir.string()});
  ::setenv("KAGENT_NOOP_DEVICE_S", "not a number", 1);
  auto bad = backend->run({"c1", "anything", device_mode::benchmark, s.dir.string()});
  ::unsetenv("KAGENT_NOOP_DEVICE_S");
  auto unset = backend->run({"c2", "anything", device_mode::benchmark, s.dir.string()});
  EXPECT_TRUE(v.verified);
  EXPECT_GE(v.wall_s, 0.2);
  EXPECT_TRUE(b.benchmarked);
  EXPECT_DOUBLE_EQ(b.time_ms, 1.0);
  EXPECT_GE(b.wall_s, 0.2);
  EXPECT_EQ(w.wall_s, 0.0);
  EXPECT_EQ(bad.wall_s, 0.0);
  EXPECT_EQ(unset.wall_s, 0.0);
}

TEST(DeviceBackendNoop, PassesAndAnswersOneMillisecond) {
  scratch s;
  auto d = cpu_settings(s, "warm");
  d.verifier = "noop";
  auto backend = make_device_backend(d);
  auto r = backend->run({"c0", "anything", device_mode::benchmark, s.dir.string()});
  EXPECT_TRUE(r.verified);
  EXPECT_TRUE(r.benchmarked);
  EXPECT_DOUBLE_EQ(r.time_ms, 1.0);
  EXPECT_LT(r.eager_ms, 0);  // references are not measured
  EXPECT_EQ(r.code_hash.size(), 64u);
  auto v = backend->run({"c0", "anything", device_mode::verify, s.dir.string()});
  EXPECT_FALSE(v.benchmarked);
}

}  // namespace
