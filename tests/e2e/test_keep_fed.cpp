// Keeping the device fed behind a slow LLM (issue 14, item 4), end to end on `noop` devices: each
// device request holds the device KAGENT_NOOP_DEVICE_S seconds without using the CPU, and every LLM
// reply (the replay provider) takes KAGENT_REPLAY_DELAY_S. The events of a real run show when each
// candidate was dispatched, measured, and when each parent's analysis came back.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <iomanip>
#include <sstream>

#include "tests/e2e/e2e_util.hpp"

using namespace e2e;

namespace {

const std::string kMatvec = source("examples/optimize_01_matvec");
// 160 distinct optimize replies, one bottleneck reply of 3 directions, one reflexion reply.
const std::string kReplayWide = source("benchmarks/h200/replay_matvec_wide");
const std::string kFakes = source("tests/fakes");
const std::string kFixtures = source("tests/fakes/fixtures/profiling");

struct event {
  double t = 0;  ///< seconds since the run's first event
  nlohmann::json j;
};

/// "2026-12-06T04:12:11.517Z" in seconds (UTC), with its milliseconds.
double seconds_of(const std::string& ts) {
  std::tm tm{};
  std::istringstream in(ts.substr(0, 19));
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  const double ms = ts.size() >= 23 ? std::stod(ts.substr(20, 3)) : 0.0;
  return static_cast<double>(timegm(&tm)) + ms / 1000.0;
}

std::vector<event> events_of(const fs::path& run_dir) {
  std::vector<event> out;
  std::istringstream in(slurp(run_dir / "events.jsonl"));
  double t0 = -1;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    event e;
    e.j = nlohmann::json::parse(line);
    const double t = seconds_of(e.j.value("ts", ""));
    if (t0 < 0) t0 = t;
    e.t = t - t0;
    out.push_back(std::move(e));
  }
  return out;
}

fs::path run_one(const scratch& s, const std::string& name, const std::string& yaml, const kagent::env_map& env) {
  const auto cfg = s.write("cfg/" + name + ".yaml", yaml);
  auto r = run({"--strategy", cfg, "--kernel-dir", kMatvec, "--run-dir", (s.dir / ("runs_" + name)).string(), "-q"},
               env, "", 300);
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  auto dirs = run_dirs(s.dir / ("runs_" + name));
  return dirs.size() == 1 ? dirs[0] : fs::path{};
}

std::string search_yaml(int rounds, const std::string& platform) {
  return "strategy: beam_search\nnum_workers: auto\nmax_rounds: " + std::to_string(rounds) +
         "\nstrategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 3\n  samples_per_prompt: 4\n"
         "  schedule: async\nroofline_config:\n  early_stop: false\n" + platform +
         "benchmark_warmup: 2\nbenchmark_repeat: 5\nmax_refine_attempts: 0\n"
         "llm:\n  provider: replay\n  replay_dir: " + kReplayWide + "\n";
}

} // namespace

TEST(KeepFed, TheFirstGenerationIsSizedBeforeAnyCandidateFinishes) {
  // 1 s replies, two per candidate, and 0.1 s of device per candidate: auto wants ceil(2.1 / 0.1) + 1
  // pipelines. Sized only from finished candidates, it would keep its floor of 4 until two of them
  // had come back (their code and their reflexion: 2 s), and the other 8 of the 12 first-generation
  // candidates (3 directions x 4 samples, all from the starting kernel) would wait for them.
  scratch s;
  const auto dir = run_one(s, "fed", search_yaml(1, "platform: noop\ntarget_platform: cpu\n"),
                           {{"PATH", "/usr/bin:/bin"}, {"KAGENT_INJECT_FAULT", ""},
                            {"KAGENT_REPLAY_DELAY_S", "1"}, {"KAGENT_NOOP_DEVICE_S", "0.05"}});
  ASSERT_FALSE(dir.empty());
  const auto ev = events_of(dir);
  int sized = -1, started_before_any_result = 0, started = 0;
  bool any_result = false;
  std::string reason;
  for (const auto& e : ev) {
    const auto type = e.j.value("type", "");
    if (type == "concurrency" && started == 0) {
      sized = e.j.value("num_workers", -1);
      reason = e.j.value("reason", "");
    }
    if (type == "candidate_start") {
      ++started;
      if (!any_result) ++started_before_any_result;
    }
    if (type == "candidate_result") any_result = true;
  }
  EXPECT_EQ(started, 12);
  EXPECT_GE(sized, 12) << "auto sized the pipelines before the first candidate went out: " << reason;
  EXPECT_NE(reason.find("first estimate from the starting kernel"), std::string::npos) << reason;
  EXPECT_EQ(started_before_any_result, 12) << "every first-generation candidate goes out at once";
  const auto summary = nlohmann::json::parse(slurp(dir / "summary.json"));
  EXPECT_EQ(summary.value("num_workers_mode", ""), "auto");
}

TEST(KeepFed, ANewParentsBaselineProfileGoesAheadOfTheEvaluationsQueuedAtItsDevice) {
  // noop devices with a profiler: rocprofv3 is tests/fakes/rocprofv3 (it runs no program and notes
  // when each invocation ran). With 2 s replies and 0.2 s of device per candidate, the 12 first-
  // generation candidates go out together and their evaluations reach the one device together. The
  // first one measured enters the beam, and its analysis starts with a baseline profile on that
  // device. Taken in arrival order, the profile would run after every evaluation queued before it
  // (and the next generation would wait for them); it goes ahead of them.
  scratch s;
  const std::string platform =
      "platform:\n  default: noop\n  profiler: rocm\n  roofline_analyzer: rocm\n"
      "gpu_name: AMD Instinct MI300X\ntarget_platform: rocm\nprofile_budget_s: 60\n"
      "platform_kwargs:\n  rocprof_bin_path: " + kFakes + "/rocprofv3\nsandbox:\n  mode: off\n";
  const auto windows = s.dir / "rocprof_windows.txt";
  const auto dir = run_one(s, "urgent", search_yaml(2, platform),
                           {{"PATH", "/usr/bin:/bin"}, {"KAGENT_INJECT_FAULT", ""},
                            {"KAGENT_REPLAY_DELAY_S", "2"}, {"KAGENT_NOOP_DEVICE_S", "0.1"},
                            {"FAKE_ROCPROF_FIXTURES", kFixtures + "/rocm_mi300x_matvec"},
                            {"FAKE_ROCPROF_RUN_PROGRAM", "0"}, {"FAKE_ROCPROF_WINDOWS", windows.string()},
                            // Profiles of these kernels from other runs must not come from the cache.
                            {"KAGENT_CACHE_DIR", (s.dir / "cache").string()}});
  ASSERT_FALSE(dir.empty());
  const auto ev = events_of(dir);
  const double t0 = seconds_of(ev.front().j.value("ts", ""));
  std::vector<double> first_generation;  // when each first-generation candidate's evaluation came back
  std::string child;
  for (const auto& e : ev) {
    const auto type = e.j.value("type", "");
    if (type == "candidate_result" && e.j.value("round", 0) == 1) first_generation.push_back(e.t);
    if (type == "analysis_start" && e.j.value("parent_id", "initial") != "initial" && child.empty())
      child = e.j.value("parent_id", "");
  }
  ASSERT_EQ(first_generation.size(), 12u);
  ASSERT_FALSE(child.empty()) << "a first-generation kernel became a parent";
  EXPECT_TRUE(fs::exists(dir / "baseline_profiles" / child)) << child;
  // The first rocprofv3 command after the first result is the new parent's baseline profile.
  double profile_start = -1;
  std::istringstream in(slurp(windows));
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    long pid = 0;
    double a = 0, b = 0;
    if (!(f >> pid >> a >> b)) continue;
    const double t = a - t0;
    if (t > first_generation.front() && (profile_start < 0 || t < profile_start)) profile_start = t;
  }
  ASSERT_GE(profile_start, 0) << "no profile after the first result: " << slurp(windows);
  const auto after = std::count_if(first_generation.begin(), first_generation.end(),
                                   [&](double t) { return t > profile_start; });
  // In arrival order none would come back after it (all 12 were queued before it was asked for).
  EXPECT_GE(after, 6) << "first-generation evaluations that the device ran after the baseline profile of " << child
                      << " (started " << profile_start << " s into the run)";
}
