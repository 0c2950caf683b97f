// The profile policy end to end (issue 14): real kagent-actors runs on the cpu platform with the
// profiler component set to rocm and tests/fakes/rocprofv3 standing in for rocprofv3. The matvec
// replay set produces a duplicate in round 1 (the same kernel with other comments and layout), so a
// run shows whether duplicates are profiled, and which kernels each policy profiles.
#include <gtest/gtest.h>

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

struct policy_run {
  fs::path dir;
  nlohmann::json summary;
  std::set<std::string> sol;        ///< candidates with a SOL profile that ran rocprofv3
  std::set<std::string> finals;     ///< kernels with a final profile
  std::set<std::string> baselines;  ///< parents with a baseline profile
  std::set<std::string> parents;    ///< parents that candidates expanded
  std::set<std::string> verified, duplicates;
  std::string best_code;
  size_t tool_calls = 0;            ///< rocprofv3 commands the fake saw
};

/// `policy` empty: the config leaves `profile` at its default.
policy_run run_with(const scratch& s, const std::string& policy, const std::string& name, int rounds = 2) {
  std::string y = "strategy: beam_search\nnum_workers: 1\nmax_rounds: " + std::to_string(rounds) + "\n"
                  "strategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 2\n"
                  "platform:\n  default: cpu\n  profiler: rocm\n  roofline_analyzer: rocm\n"
                  "gpu_name: AMD Instinct MI300X\ntarget_platform: rocm\n"
                  "benchmark_warmup: 2\nbenchmark_repeat: 5\nprofile_budget_s: 30\n"
                  // Not what these runs are about: no inductor compile of the reference, no test.py.
                  "compile_reference: false\nuser_test: never\n" +
                  (policy.empty() ? std::string{} : "profile: " + policy + "\n") +
                  "platform_kwargs:\n  rocprof_bin_path: " + kFakes + "/rocprofv3\n"
                  "llm:\n  provider: replay\n  replay_dir: " + kMatvec + "/replay\n"
                  // The fake appends to FAKE_ROCPROF_LOG in the scratch directory, outside a sandbox.
                  "sandbox:\n  mode: off\n";
  const auto cfg = s.write("cfg/" + name + ".yaml", y);
  const auto log = (s.dir / (name + "_fake.log")).string();
  kagent::env_map env{{"PATH", "/usr/bin:/bin"}, {"KAGENT_INJECT_FAULT", ""},
                      {"FAKE_ROCPROF_FIXTURES", kFixtures + "/rocm_mi300x_matvec"}, {"FAKE_ROCPROF_RUN_PROGRAM", "0"},
                      {"FAKE_ROCPROF_LOG", log}};
  auto r = run({"--strategy", cfg, "--kernel-dir", kMatvec, "--run-dir", (s.dir / ("runs_" + name)).string()}, env, "",
               400);
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  policy_run out;
  auto dirs = run_dirs(s.dir / ("runs_" + name));
  if (dirs.size() != 1) {
    ADD_FAILURE() << "expected one run directory";
    return out;
  }
  out.dir = dirs[0];
  out.summary = nlohmann::json::parse(slurp(out.dir / "summary.json"));
  auto db = program_db::open(out.dir / "program.db", program_db::mode::read_only);
  for (const auto& p : db.list_programs()) {
    if (p.id == "initial") continue;
    if (p.parent_id) out.parents.insert(*p.parent_id);
    if (p.status == "verified") out.verified.insert(p.id);
    if (p.failure_cause.value_or("") == "duplicate") out.duplicates.insert(p.id);
    const auto cdir = out.dir / "candidates" / p.id;
    if (fs::exists(cdir / ("profile_" + p.id + "_sol") / "invocations.jsonl")) out.sol.insert(p.id);
    if (fs::exists(cdir / ("profile_" + p.id + "_final") / "invocations.jsonl")) out.finals.insert(p.id);
  }
  if (fs::exists(out.dir / "baseline_profiles"))
    for (const auto& e : fs::directory_iterator(out.dir / "baseline_profiles"))
      for (const auto& f : fs::recursive_directory_iterator(e.path()))
        if (f.path().filename() == "invocations.jsonl") out.baselines.insert(e.path().filename().string());
  out.best_code = slurp(out.dir / "output/best_kernel.py");
  if (fs::exists(log)) {
    std::ifstream f(log);
    std::string line;
    while (std::getline(f, line))
      if (!line.empty()) ++out.tool_calls;
  }
  return out;
}

}  // namespace

// The default, `profile: parents`: no candidate is profiled for its own sake; every parent the search
// expands is profiled once (its baseline), and the best kernel once more at the end when it has no
// profile yet. The same best kernel is found with fewer profiler commands than `every`: in 3 rounds
// the replay set's mv-v5 is verified but diverges, so it is never a parent and never profiled.
TEST(ProfilePolicy, EveryNeverProfilesADuplicateAndParentsProfilesOnlyWhatTheSearchExpands) {
  scratch s;
  auto every = run_with(s, "every", "every", 3);
  // `profile: every`: each new verified kernel gets exactly one SOL profile, and a duplicate none:
  // the manager recognises it before the profile (duplicates used to be profiled too).
  ASSERT_TRUE(every.summary.value("success", false)) << every.summary.dump(2);
  ASSERT_FALSE(every.duplicates.empty()) << "the replay set's duplicates are what this test is about";
  EXPECT_EQ(every.sol, every.verified) << "a SOL profile for every verified candidate, and only for those";
  for (const auto& d : every.duplicates) EXPECT_FALSE(every.sol.count(d)) << d << " is a duplicate and was profiled";

  auto parents = run_with(s, "", "default", 3);
  ASSERT_TRUE(parents.summary.value("success", false)) << parents.summary.dump(2);
  EXPECT_TRUE(parents.sol.empty()) << "a candidate was profiled: " << *parents.sol.begin();
  EXPECT_EQ(parents.baselines, parents.parents) << "one baseline profile per expanded parent";
  const std::string best = parents.summary.value("best_program_id", "");
  ASSERT_FALSE(best.empty());
  if (parents.parents.count(best))
    EXPECT_TRUE(parents.finals.empty()) << "the best was profiled as a parent; no final profile needed";
  else
    EXPECT_EQ(parents.finals, std::set<std::string>{best}) << "the best kernel gets its final profile";
  EXPECT_EQ(parents.best_code, every.best_code) << "the same best kernel under both policies";
  EXPECT_EQ(parents.verified.size(), every.verified.size());
  EXPECT_LT(parents.tool_calls, every.tool_calls) << "parents: " << parents.tool_calls << " every: " << every.tool_calls;
  EXPECT_GT(parents.tool_calls, 0u);
}

// `profile: never`: not one profiler command, and the run still completes with a verified best.
TEST(ProfilePolicy, NeverRunsNoProfilerAtAll) {
  scratch s;
  auto r = run_with(s, "never", "never");
  ASSERT_TRUE(r.summary.value("success", false)) << r.summary.dump(2);
  EXPECT_EQ(r.tool_calls, 0u);
  EXPECT_TRUE(r.sol.empty());
  EXPECT_TRUE(r.baselines.empty());
  EXPECT_TRUE(r.finals.empty());
  EXPECT_FALSE(r.verified.empty());
  // torch.compile of the reference ran in the evaluator: its inductor cache did not stay behind.
  for (const auto& e : fs::recursive_directory_iterator(r.dir))
    EXPECT_EQ(e.path().filename().string().rfind("torchinductor_", 0), std::string::npos) << e.path();
}
