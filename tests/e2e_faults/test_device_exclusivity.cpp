// One device, one measurement at a time (issue 13 item 5, SPEC §14 B.91-B.92), end to end: a real run
// on the cpu platform with three candidates in flight on one device, every new kernel profiled
// (`profile: every`, tests/fakes/rocprofv3 running the real profile wrapper in its stats pass, so the
// kernel executes under the "profiler" too). Each candidate kernel writes down, from inside every
// call, when it ran, and the fake profiler writes down when each of its invocations ran. A kernel call
// of verification or benchmark that intersects a profiler invocation, or another process's kernel
// call, means two measurements shared the device.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "tests/e2e/e2e_util.hpp"

using namespace e2e;

namespace {

const std::string kFakes = source("tests/fakes");
const std::string kFixtures = source("tests/fakes/fixtures/profiling");
const std::string kMatvec = source("examples/optimize_01_matvec");

/// The matvec kernel with other tile sizes, wrapped so that every call appends
/// "pid ppid start end" to `trace` (and lasts at least 30 ms, so that overlaps cannot hide).
std::string traced_variant(int block_m, int block_k, const std::string& trace) {
  std::string code = slurp(kMatvec + "/input.py");
  const std::string from = "BLOCK_M, BLOCK_K = 16, 512";
  code.replace(code.find(from), from.size(), "BLOCK_M, BLOCK_K = " + std::to_string(block_m) + ", " + std::to_string(block_k));
  code += "\n\nimport os as _os\nimport time as _time\n_untraced = kernel_function\n\n\n"
          "def kernel_function(A, B):\n"
          "    t0 = _time.time()\n"
          "    y = _untraced(A, B)\n"
          "    _time.sleep(0.03)\n"
          "    with open(\"" + trace + "\", \"a\") as f:\n"
          "        f.write(f\"{_os.getpid()} {_os.getppid()} {t0:.6f} {_time.time():.6f}\\n\")\n"
          "    return y\n";
  return "Here is the faster kernel.\n\n```python\n" + code + "```\n";
}

struct window {
  long pid = 0, ppid = 0;  ///< a profiler invocation: its own pid, ppid 0
  double start = 0, end = 0;
  bool profiler = false;
};

std::vector<window> read_windows(const fs::path& p, bool profiler) {
  std::vector<window> out;
  std::ifstream f(p);
  window w;
  w.profiler = profiler;
  if (profiler)
    while (f >> w.pid >> w.start >> w.end) out.push_back(w);
  else
    while (f >> w.pid >> w.ppid >> w.start >> w.end) out.push_back(w);
  return out;
}

/// One measurement inside another: a kernel call of the profiled program, inside its profiler's run.
bool nested(const window& a, const window& b) {
  return (a.profiler && !b.profiler && b.ppid == a.pid) || (b.profiler && !a.profiler && a.ppid == b.pid);
}

} // namespace

TEST(DeviceExclusivity, VerifyBenchmarkAndProfileNeverOverlapOnOneDevice) {
  scratch s;
  const std::string trace = (s.dir / "trace.txt").string();
  s.write("replay/optimize_001.md", traced_variant(32, 1024, trace));
  s.write("replay/optimize_002.md", traced_variant(64, 2048, trace));
  s.write("replay/optimize_003.md", traced_variant(16, 1024, trace));
  s.write("replay/bottleneck_001.md",
          R"([{"category": "memory", "summary": "wider tiles", "reasoning": "bandwidth bound"},)"
          R"( {"category": "memory", "summary": "taller tiles", "reasoning": "bandwidth bound"},)"
          R"( {"category": "underutilized", "summary": "fewer programs", "reasoning": "small grid"}])");
  s.write("replay/reflexion_001.md", R"({"was_diagnosis_correct": true, "was_fix_effective": true, "lessons": []})");
  s.write("replay/reflexion_002.md", R"({"was_diagnosis_correct": true, "was_fix_effective": true, "lessons": []})");
  s.write("replay/reflexion_003.md", R"({"was_diagnosis_correct": true, "was_fix_effective": true, "lessons": []})");
  const std::string y = "strategy: beam_search\nnum_workers: 3\nmax_rounds: 1\n"
                        "strategy_config:\n  num_top_kernels: 1\n  num_bottlenecks: 3\n"
                        "platform:\n  default: cpu\n  profiler: rocm\n  roofline_analyzer: rocm\n"
                        "gpu_name: AMD Instinct MI300X\ntarget_platform: rocm\n"
                        "benchmark_warmup: 2\nbenchmark_repeat: 5\nprofile_budget_s: 120\nprofile: every\n"
                        "compile_reference: false\n"
                        "platform_kwargs:\n  rocprof_bin_path: " + kFakes + "/rocprofv3\n"
                        "llm:\n  provider: replay\n  replay_dir: " + (s.dir / "replay").string() + "\n"
                        // The kernels and the fake write into the scratch directory, outside a sandbox.
                        "sandbox:\n  mode: off\n";
  const auto cfg = s.write("cfg/exclusive.yaml", y);
  const auto log = s.dir / "fake.log";
  const auto profiler_trace = s.dir / "profiler_windows.txt";
  kagent::env_map env{{"PATH", "/usr/bin:/bin"}, {"KAGENT_INJECT_FAULT", ""},
                      {"FAKE_ROCPROF_FIXTURES", kFixtures + "/rocm_mi300x_matvec"}, {"FAKE_ROCPROF_RUN_PROGRAM", "stats"},
                      {"FAKE_ROCPROF_LOG", log.string()}, {"FAKE_ROCPROF_WINDOWS", profiler_trace.string()}};
  auto r = run({"--strategy", cfg, "--kernel-dir", kMatvec, "--run-dir", (s.dir / "runs").string()}, env, "", 500);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto dirs = run_dirs(s.dir / "runs");
  ASSERT_EQ(dirs.size(), 1u);
  const auto summary = nlohmann::json::parse(slurp(dirs[0] / "summary.json"));
  ASSERT_TRUE(summary.value("success", false)) << summary.dump(2);
  EXPECT_EQ(summary.value("candidates", 0), 3);
  // compile_reference: false: PyTorch eager was timed, torch.compile was not.
  EXPECT_FALSE(summary.contains("speedup_vs_compile")) << summary.at("speedup_vs_compile");
  EXPECT_TRUE(summary.at("speedup_vs_eager").is_number());
  EXPECT_TRUE(summary.at("synthetic_devices").empty()) << "every profile ran: " << summary.at("synthetic_devices").dump();

  auto windows = read_windows(trace, false);
  const auto profiles = read_windows(profiler_trace, true);
  // The test proves something only when all three kinds of device work ran: kernel calls from the
  // evaluator's processes and from the profiled programs, and the profiler's invocations.
  std::set<long> profiler_pids;
  for (const auto& p : profiles) profiler_pids.insert(p.pid);
  size_t under_profiler = 0;
  for (const auto& w : windows)
    if (profiler_pids.count(w.ppid)) ++under_profiler;
  ASSERT_GE(windows.size(), 30u) << "verification and benchmark calls of three candidates";
  EXPECT_GE(profiles.size(), 4u * 8u) << "the starting kernel's baseline and three SOL profiles, 8 commands each";
  EXPECT_GE(under_profiler, 3u) << "every candidate's SOL profile ran its kernel";
  EXPECT_GT(windows.size(), under_profiler) << "verification and benchmark calls ran it too";
  windows.insert(windows.end(), profiles.begin(), profiles.end());

  size_t overlaps = 0;
  for (size_t i = 0; i < windows.size(); ++i)
    for (size_t j = i + 1; j < windows.size(); ++j) {
      const auto& a = windows[i];
      const auto& b = windows[j];
      if (a.pid == b.pid || nested(a, b)) continue;  // one process calls one kernel at a time
      if (a.start < b.end && b.start < a.end && ++overlaps <= 5)
        ADD_FAILURE() << (a.profiler ? "profiler " : "kernel ") << a.pid << " ran " << a.start << ".." << a.end
                      << " and " << (b.profiler ? "profiler " : "kernel ") << b.pid << " ran " << b.start << ".."
                      << b.end << " on the same device";
    }
  EXPECT_EQ(overlaps, 0u);
}
