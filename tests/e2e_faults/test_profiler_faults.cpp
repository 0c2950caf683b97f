// Fault injection, end to end (issue 7): real kagent-actors runs on the cpu platform (real
// verification and timing in Triton's interpreter) with the profiler and roofline components set to
// rocm or nvidia through the per-component platform map, and tests/fakes/rocprofv3 or tests/fakes/ncu
// standing in for the profiler. One fault per run, on the baseline profile of the starting kernel or
// on a mid-run (SOL) profile. Every run must complete with exit 0 and a verified best kernel, say in
// its summary and events what happened, be in the right mode afterwards (synthetic after a ROCm
// failure, still profiling on NVIDIA), and leave no process behind.
#include <gtest/gtest.h>

#include <dirent.h>

#include <fstream>
#include <map>
#include <set>

#include "platform/store/program_db.hpp"
#include "tests/e2e/e2e_util.hpp"

using namespace e2e;
using kagent::store::program_db;

namespace {

const std::string kFakes = source("tests/fakes");
const std::string kFixtures = source("tests/fakes/fixtures/profiling");
const std::string kMatvec = source("examples/optimize_01_matvec");

std::string variant(int block_m, int block_k) {
  std::string code = slurp(kMatvec + "/input.py");
  const std::string from = "BLOCK_M, BLOCK_K = 16, 512";
  code.replace(code.find(from), from.size(), "BLOCK_M, BLOCK_K = " + std::to_string(block_m) + ", " + std::to_string(block_k));
  return "Here is the faster kernel.\n\n```python\n" + code + "```\n";
}

// A small replay set: two rewrites, two bottleneck analyses, two reflexions, in call order.
void write_replay(const scratch& s) {
  s.write("replay/optimize_001.md", variant(32, 1024));
  s.write("replay/optimize_002.md", variant(64, 2048));
  const std::string bottleneck =
      R"([{"category": "memory", "summary": "A is streamed once; wider tiles cut the loop overhead",)"
      R"( "reasoning": "matvec is bandwidth bound", "root_causes": [{"cause": "small tiles",)"
      R"( "evidence": [], "fixes": [{"fix": "raise BLOCK_M and BLOCK_K", "rationale": "fewer programs"}]}]}])";
  s.write("replay/bottleneck_001.md", bottleneck);
  s.write("replay/bottleneck_002.md", bottleneck);
  const std::string reflexion =
      R"({"was_diagnosis_correct": true, "was_fix_effective": true, "expected_outcome": "faster",)"
      R"( "actual_outcome": "faster", "reasoning": "larger tiles", "lessons": ["tiles matter"],)"
      R"( "avoid_patterns": [], "try_patterns": ["bigger BLOCK_K"]})";
  s.write("replay/reflexion_001.md", reflexion);
  s.write("replay/reflexion_002.md", reflexion);
}

struct fault_case {
  std::string name;
  std::string vendor;                       ///< rocm | nvidia
  std::map<std::string, std::string> env;   ///< selects the fault in the fake
  std::string where;  ///< "baseline", "_sol" (mid-run) or "" (every profile): FAKE_*_FAULT_ONLY_IN
  bool fails;                               ///< the profile fails (vs accepted)
};

std::ostream& operator<<(std::ostream& o, const fault_case& c) { return o << c.name; }

// `user_test`: whether the kernel directory's test.py runs (for the starting kernel and each new best,
// as users run it). Most cases leave it out: the profiler is what they are about, and test.py costs
// a fresh interpreter with torch per run (15 s runs become 7 s). The hang cases keep it, so that a run
// with test.py and a hung profiler is still covered (and leaves no __pycache__ behind).
// `budget_s`: the profile budget. A hung profiler waits out what the budget gives each invocation, so
// the hang cases get a smaller one.
std::string config_for(const scratch& s, const std::string& vendor, bool user_test = true, int budget_s = 8) {
  std::string y = std::string(user_test ? "" : "user_test: never\n") + "strategy: beam_search\nnum_workers: 1\nmax_rounds: 2\n"
                  "strategy_config:\n  num_top_kernels: 1\n  num_bottlenecks: 1\n"
                  "platform:\n  default: cpu\n  profiler: " + vendor + "\n  roofline_analyzer: " + vendor + "\n" +
                  "gpu_name: " + std::string(vendor == "rocm" ? "AMD Instinct MI300X" : "NVIDIA H200") + "\n" +
                  "target_platform: " + (vendor == "rocm" ? "rocm" : "cuda") + "\n" +
                  "benchmark_warmup: 2\nbenchmark_repeat: 5\ncandidate_timeout_s: 300\n"
                  "profile_budget_s: " + std::to_string(budget_s) + "\n" +
                  // Not what these runs are about: spare each one an inductor compile.
                  "compile_reference: false\n"
                  // Every verified candidate is profiled: the mid-run faults hit a SOL profile.
                  "profile: every\n"
                  "platform_kwargs:\n  " + (vendor == "rocm" ? "rocprof_bin_path: " + kFakes + "/rocprofv3"
                                                              : "ncu_bin_path: " + kFakes + "/ncu") + "\n" +
                  "llm:\n  provider: replay\n  replay_dir: " + (s.dir / "replay").string() + "\n" +
                  // The fakes append to FAKE_*_LOG in the scratch directory, outside the profile's
                  // sandbox (tests/process/test_sandbox.cpp covers the sandbox itself).
                  "sandbox:\n  mode: off\n";
  return s.write("cfg/faulty.yaml", y);
}


std::vector<nlohmann::json> jsonl(const fs::path& p) {
  std::vector<nlohmann::json> out;
  std::ifstream f(p);
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

class ProfilerFault : public ::testing::TestWithParam<fault_case> {};

TEST_P(ProfilerFault, RunCompletesWithAVerifiedBestAndTheRightMode) {
  const auto& c = GetParam();
  scratch s;
  write_replay(s);
  const bool hangs = c.name.find("_hang_") != std::string::npos;
  const int budget_s = hangs ? 4 : 8;
  const auto cfg = config_for(s, c.vendor, c.name.find("_hang_baseline") != std::string::npos, budget_s);
  // A private copy of the kernel directory and a private TMPDIR: after the run both must hold
  // exactly what they held before (no __pycache__, no temporary file outside the run directory).
  for (const char* f : {"input.py", "problem.py", "test.py"}) s.write(std::string("kdir/") + f, slurp(kMatvec + "/" + f));
  fs::create_directories(s.dir / "tmp");
  const auto fake_log = (s.dir / "fake.log").string();
  kagent::env_map env{{"PATH", "/usr/bin:/bin"}, {"KAGENT_INJECT_FAULT", ""}, {"TMPDIR", (s.dir / "tmp").string()}};
  if (c.vendor == "rocm") {
    env["FAKE_ROCPROF_FIXTURES"] = kFixtures + (c.env.count("FAKE_ROCPROF_ARCH") ? "/rocm_gfx90a_matvec" : "/rocm_mi300x_matvec");
    env["FAKE_ROCPROF_RUN_PROGRAM"] = "0";
    env["FAKE_ROCPROF_LOG"] = fake_log;
    if (!c.where.empty()) env["FAKE_ROCPROF_FAULT_ONLY_IN"] = c.where;
  } else {
    env["FAKE_NCU_FIXTURES"] = kFixtures + "/ncu_h200_matvec";
    env["FAKE_NCU_RUN_PROGRAM"] = "0";
    env["FAKE_NCU_LOG"] = fake_log;
    if (!c.where.empty()) env["FAKE_NCU_FAULT_ONLY_IN"] = c.where;
  }
  for (const auto& [k, v] : c.env) env[k] = v;
  auto r = run({"--strategy", cfg, "--kernel-dir", (s.dir / "kdir").string(), "--run-dir", (s.dir / "runs").string()},
               env, "", 400);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto dirs = run_dirs(s.dir / "runs");
  ASSERT_EQ(dirs.size(), 1u);
  const auto run_dir = dirs[0];
  auto summary = nlohmann::json::parse(slurp(run_dir / "summary.json"));
  ASSERT_TRUE(summary["success"].get<bool>()) << summary.dump(2);

  // The best kernel is a verified program and the fastest of them.
  auto db = program_db::open(run_dir / "program.db", program_db::mode::read_only);
  auto best = db.get_program(summary["best_program_id"].get<std::string>());
  ASSERT_TRUE(best);
  EXPECT_EQ(best->status, "verified");
  EXPECT_EQ(slurp(run_dir / "output/best_kernel.py"), best->code);
  for (const auto& p : db.list_programs({.status = std::string{"verified"}}))
    EXPECT_GE(p.time_ms.value_or(1e300), *best->time_ms) << p.id;
  EXPECT_GE(db.count("verified"), 2);
  // No candidate was lost to the profiler: a profile never fails a candidate.
  EXPECT_EQ(summary["failures_by_cause"].value("timeout", 0), 0) << summary.dump(2);

  auto ev = events(run_dir);
  int failed_events = 0, mode_changes = 0;
  for (const auto& e : ev) {
    if (e.value("type", "") == "profiling_failed") ++failed_events;
    if (e.value("type", "") == "mode_change") ++mode_changes;
  }
  const bool synthetic_expected = c.fails && c.vendor == "rocm";
  EXPECT_EQ(failed_events > 0, c.fails) << c.name;
  EXPECT_EQ(summary["profiling_failures"].get<int>() > 0, c.fails);
  EXPECT_EQ(mode_changes, synthetic_expected ? 1 : 0);
  EXPECT_EQ(summary["synthetic_devices"].size(), synthetic_expected ? 1u : 0u) << summary.dump(2);

  // Every profiler invocation is recorded in the run directory; after a ROCm failure no rocprofv3
  // command runs again on that device.
  std::vector<nlohmann::json> records;
  for (const auto& e : fs::recursive_directory_iterator(run_dir))
    if (e.path().filename() == "invocations.jsonl")
      for (auto& j : jsonl(e.path())) records.push_back(j);
  const auto calls = jsonl(fake_log);
  // One invocation may be recorded in several directories (a batch's process, in its own directory and
  // in each of its kernels'): told apart by their command lines, which name each one's own log file.
  std::set<std::string> recorded;
  for (const auto& rec : records) recorded.insert(rec.value("argv", nlohmann::json::array()).dump());
  EXPECT_EQ(recorded.size(), calls.size()) << "every invocation the fake saw has a record";
  for (const auto& rec : records) {
    EXPECT_TRUE(rec.contains("argv")) << rec.dump();
    EXPECT_TRUE(rec.contains("wall_s")) << rec.dump();
    EXPECT_LE(rec.value("timeout_s", 0.0), budget_s + 1e-9) << "every timeout comes from the profile budget";
  }
  if (synthetic_expected) {
    // The failing profile was the last one that ran a tool: the starting kernel's baseline profile
    // (a baseline fault), or that and the first candidate's SOL profile (a mid-run fault).
    std::set<std::string> profile_dirs;
    for (const auto& e : fs::recursive_directory_iterator(run_dir))
      if (e.path().filename() == "invocations.jsonl") profile_dirs.insert(e.path().parent_path().filename().string());
    EXPECT_EQ(profile_dirs.size(), c.where == "_sol" ? 2u : 1u) << "profiles before and including the failure only";
  } else if (c.vendor == "nvidia" || !c.fails) {
    // Still profiling: the second round's candidate got its SOL profile attempt.
    bool second_round_profiled = false;
    for (const auto& e : fs::recursive_directory_iterator(run_dir))
      if (e.path().filename() == "invocations.jsonl" && e.path().string().find("r2_c") != std::string::npos)
        second_round_profiled = true;
    EXPECT_TRUE(second_round_profiled);
  }
  // Nothing was left outside the run directory.
  std::vector<std::string> strays;
  for (const auto& e : fs::recursive_directory_iterator(s.dir / "kdir")) strays.push_back(e.path().string());
  for (const auto& e : fs::recursive_directory_iterator(s.dir / "tmp")) strays.push_back(e.path().string());
  EXPECT_EQ(strays.size(), 3u) << "expected only input.py, problem.py and test.py; first extra: " << strays.back();
  // No process started by the run is still alive.
  auto left = processes_mentioning(s.dir.string());
  EXPECT_TRUE(left.empty()) << left.front();
}

std::vector<fault_case> rocm_cases() {
  std::vector<fault_case> out;
  auto add = [&](const std::string& name, std::map<std::string, std::string> env, bool fails, bool mid_too) {
    out.push_back({"rocm_" + name + "_baseline", "rocm", env, "baseline", fails});
    if (mid_too) out.push_back({"rocm_" + name + "_midrun", "rocm", env, "_sol", fails});
  };
  add("hang", {{"FAKE_ROCPROF_FAULT_STATS", "hang"}}, true, true);
  add("signal", {{"FAKE_ROCPROF_FAULT_STATS", "signal"}}, true, true);
  add("exit_nonzero", {{"FAKE_ROCPROF_FAULT_FETCH_SIZE", "exit_nonzero"}}, true, true);
  add("no_csv", {{"FAKE_ROCPROF_FAULT_STATS", "no_csv"}}, true, true);
  add("empty_csv", {{"FAKE_ROCPROF_FAULT_WRITE_SIZE", "empty_csv"}}, true, false);
  add("stale_csv", {{"FAKE_ROCPROF_FAULT_STATS", "stale"}}, true, true);
  add("no_average", {{"FAKE_ROCPROF_FAULT_STATS", "no_average"}}, true, false);
  add("partial_counters", {{"FAKE_ROCPROF_FAULT_SQ_WAVES", "partial"}}, false, false);
  add("ea0_rejected", {{"FAKE_ROCPROF_ARCH", "gfx90a"}}, false, false);
  add("slow_within_budget", {{"FAKE_ROCPROF_FAULT", "slow"}, {"FAKE_ROCPROF_SLOW_S", "0.2"}}, false, false);
  out.push_back({"rocm_hang_on_every_invocation", "rocm", {{"FAKE_ROCPROF_FAULT", "hang"}}, "", true});
  return out;
}

std::vector<fault_case> nvidia_cases() {
  std::vector<fault_case> out;
  auto add = [&](const std::string& name, std::map<std::string, std::string> env, bool fails, bool mid_too) {
    out.push_back({"nvidia_" + name + "_baseline", "nvidia", env, "baseline", fails});
    if (mid_too) out.push_back({"nvidia_" + name + "_midrun", "nvidia", env, "_sol", fails});
  };
  add("hang", {{"FAKE_NCU_FAULT", "hang"}}, true, true);
  add("signal", {{"FAKE_NCU_FAULT", "signal"}}, true, false);
  add("exit_nonzero", {{"FAKE_NCU_FAULT", "exit_nonzero"}}, true, false);
  add("permission", {{"FAKE_NCU_FAULT", "permission"}}, true, false);
  add("no_csv", {{"FAKE_NCU_FAULT", "no_csv"}}, true, true);
  add("empty_csv", {{"FAKE_NCU_FAULT", "empty_csv"}}, true, false);
  add("stale_csv", {{"FAKE_NCU_FAULT", "stale"}}, true, false);
  add("slow_within_budget", {{"FAKE_NCU_FAULT", "slow"}, {"FAKE_NCU_SLOW_S", "0.2"}}, false, false);
  out.push_back({"nvidia_hang_on_every_invocation", "nvidia", {{"FAKE_NCU_FAULT", "hang"}}, "", true});
  return out;
}

std::string case_name(const ::testing::TestParamInfo<fault_case>& i) { return i.param.name; }

}  // namespace

INSTANTIATE_TEST_SUITE_P(Rocm, ProfilerFault, ::testing::ValuesIn(rocm_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Nvidia, ProfilerFault, ::testing::ValuesIn(nvidia_cases()), case_name);

// Two devices: the starting kernel's baseline profile fails on device 1 (with a second local device
// the starting kernel is profiled there while device 0 runs its test.py and reference timings), so
// device 1 turns synthetic, while device 0 keeps profiling with rocprofv3 until it fails itself (it
// never does here).
TEST(ProfilerFaultTwoDevices, OnlyTheFailingDeviceTurnsSyntheticTheOtherKeepsProfiling) {
  scratch s;
  const std::string y = "strategy: beam_search\nnum_workers: 2\nmax_rounds: 2\ngpu_ids: [0, 1]\n"
                        "strategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 2\n"
                        "platform:\n  default: cpu\n  profiler: rocm\n  roofline_analyzer: rocm\n"
                        "gpu_name: AMD Instinct MI300X\ntarget_platform: rocm\n"
                        "benchmark_warmup: 2\nbenchmark_repeat: 5\nprofile_budget_s: 8\nprofile: every\n"
                        "platform_kwargs:\n  rocprof_bin_path: " + kFakes + "/rocprofv3\n"
                        "llm:\n  provider: replay\n  replay_dir: " + kMatvec + "/replay\n";
  const auto cfg = s.write("cfg/two.yaml", y);
  kagent::env_map env{{"PATH", "/usr/bin:/bin"}, {"KAGENT_INJECT_FAULT", ""},
                      {"FAKE_ROCPROF_FIXTURES", kFixtures + "/rocm_mi300x_matvec"}, {"FAKE_ROCPROF_RUN_PROGRAM", "0"},
                      {"FAKE_ROCPROF_FAULT_STATS", "exit_nonzero"}, {"FAKE_ROCPROF_FAULT_ONLY_IN", "baseline_initial"}};
  auto r = run({"--strategy", cfg, "--kernel-dir", kMatvec, "--run-dir", (s.dir / "runs").string()}, env, "", 400);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto run_dir = run_dirs(s.dir / "runs").at(0);
  auto summary = nlohmann::json::parse(slurp(run_dir / "summary.json"));
  ASSERT_TRUE(summary["success"].get<bool>()) << summary.dump(2);
  ASSERT_EQ(summary["synthetic_devices"].size(), 1u) << summary.dump(2);
  EXPECT_EQ(summary["synthetic_devices"][0]["gpu_id"], 1);
  // Which device ran each candidate, and which candidates ran rocprofv3 for their SOL profile (the
  // final profile of the best kernel may run on device 0 for a kernel found on device 1: only the
  // SOL profiles, made where the candidate ran, say which device profiled).
  auto db = program_db::open(run_dir / "program.db", program_db::mode::read_only);
  int profiled_on_1 = 0, profiled_on_0 = 0;
  for (const auto& p : db.list_programs()) {
    if (p.id == "initial" || !fs::exists(run_dir / "candidates" / p.id)) continue;
    bool profiled = false;
    for (const auto& e : fs::directory_iterator(run_dir / "candidates" / p.id))
      if (e.path().filename().string().ends_with("_sol") && fs::exists(e.path() / "invocations.jsonl"))
        profiled = true;
    if (profiled && p.gpu_id.value_or(-1) == 1) ++profiled_on_1;
    if (profiled && p.gpu_id.value_or(-1) == 0) ++profiled_on_0;
  }
  EXPECT_EQ(profiled_on_1, 0) << "device 1 is synthetic: no rocprofv3 call after its baseline failed";
  // Device 0 keeps profiling: a new kernel verified there got its SOL profile, or (when every new
  // kernel ran on device 1, duplicates are never profiled) the best's final profile ran there, the
  // only device that still profiles.
  const std::string best_id = summary["best_program_id"].get<std::string>();
  const bool final_profiled =
      fs::exists(run_dir / "candidates" / best_id / ("profile_" + best_id + "_final") / "invocations.jsonl");
  EXPECT_GE(profiled_on_0 + (final_profiled ? 1 : 0), 1) << "device 0 keeps profiling";
  auto left = processes_mentioning(s.dir.string());
  EXPECT_TRUE(left.empty()) << left.front();
}

TEST(ProfileCacheRun, ASecondRunOfTheSameKernelDirectoryTakesItsProfilesFromTheCache) {
  // Two runs of one kernel directory with one replay set, the profile cache on: the second run starts
  // no profiler for the kernels the first one profiled (its starting kernel's baseline included),
  // and finds the same best kernel.
  scratch s;
  write_replay(s);
  const auto cfg = config_for(s, "nvidia", false);
  const auto fake_log = (s.dir / "fake.log").string();
  const kagent::env_map env{{"PATH", "/usr/bin:/bin"},
                            {"KAGENT_INJECT_FAULT", ""},
                            {"KAGENT_CACHE_DIR", (s.dir / "cache").string()},
                            {"FAKE_NCU_FIXTURES", kFixtures + "/ncu_h200_matvec"},
                            {"FAKE_NCU_RUN_PROGRAM", "0"},
                            {"FAKE_NCU_LOG", fake_log}};
  std::vector<fs::path> runs;
  std::vector<size_t> ncu_calls;
  std::vector<std::string> best;
  for (int i = 0; i < 2; ++i) {
    auto r = run({"--strategy", cfg, "--kernel-dir", kMatvec, "--run-dir", (s.dir / ("runs" + std::to_string(i))).string()},
                 env, "", 400);
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    runs.push_back(run_dirs(s.dir / ("runs" + std::to_string(i))).at(0));
    // Profiles taken: the commands of profiles of their own. A standby (ncu started ahead with an NVTX
    // filter, profiler_standby) profiles nothing until a batch is handed to it; none is here (the fake
    // does not run its program, so each ends at once and is recorded as unused).
    size_t n = 0;
    std::ifstream f(fake_log);
    for (std::string line; std::getline(f, line);) {
      if (line.empty()) continue;
      const auto argv = nlohmann::json::parse(line)["argv"].get<std::vector<std::string>>();
      n += std::find(argv.begin(), argv.end(), "--nvtx-include") == argv.end();
    }
    ncu_calls.push_back(n);
    best.push_back(nlohmann::json::parse(slurp(runs.back() / "summary.json"))["best_program_id"].get<std::string>());
  }
  EXPECT_GE(ncu_calls[0], 2u) << "the first run profiles its starting kernel and its candidates";
  EXPECT_EQ(ncu_calls[1], ncu_calls[0]) << "the second run started no profiler";
  // The same best kernel, unless timing noise reorders the variants: on the CPU interpreter, under a
  // loaded machine, their order can flip between runs whatever the cache does (in one full suite run
  // the first run timed the second run's best at 58.7 ms against 43.1 ms). What the cache must not
  // change is which kernels are correct: the second run's best is one the first run verified.
  if (best[1] != best[0]) {
    auto db0 = program_db::open(runs[0] / "program.db", program_db::mode::read_only);
    auto b = db0.get_program(best[1]);
    ASSERT_TRUE(b) << best[1] << " is not in the first run";
    EXPECT_EQ(b->status, "verified") << best[1];
  }
  bool baseline_cached = false;
  for (const auto& e : fs::recursive_directory_iterator(runs[1] / "baseline_profiles"))
    if (e.path().filename() == "metrics.json" &&
        nlohmann::json::parse(slurp(e.path()))["detail"].contains("cached"))
      baseline_cached = true;
  EXPECT_TRUE(baseline_cached) << "the starting kernel's baseline came from the cache";
  EXPECT_FALSE(fs::is_empty(s.dir / "cache" / "profiles"));
}
