// The profile runner (platform/profiling) against the fake rocprofv3 and ncu: files it writes,
// invocation records, every fault the fakes offer, the one budget, and that nothing outlives a hang.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <regex>

#include "platform/profiling/profile_cache.hpp"
#include "runner_support.hpp"

using namespace kagent;
using namespace kagent::test;
namespace fs = std::filesystem;

namespace {

double metric(const kernel_profile_outcome& o, const std::string& k) { return o.metrics.at(k); }

bool under(const std::string& path, const std::string& dir) { return path.rfind(dir + "/", 0) == 0; }

/// The fake's pid of every logged invocation is gone, and so is its process group.
void expect_nothing_left(const std::vector<nlohmann::json>& log) {
  ASSERT_FALSE(log.empty());
  for (const auto& line : log) {
    int pid = line.at("pid").get<int>();
    EXPECT_FALSE(process_alive(pid)) << "pid " << pid << " survived";
    EXPECT_NE(::killpg(pid, 0), 0) << "process group " << pid << " survived";
  }
}

} // namespace

// ---- pure helpers ---------------------------------------------------------------------------------

TEST(ProfileRunner, DerivesTheLaunchedTritonKernel) {
  EXPECT_EQ(derive_kernel_name(matvec_code()), "matvec_kernel");
  // A @triton.jit helper defined first is not what is launched.
  EXPECT_EQ(derive_kernel_name("import triton\n@triton.jit\ndef _helper(x):\n    return x\n\n"
                               "@triton.autotune(configs=[], key=['n'])\n@triton.jit\ndef add_kernel(x_ptr, n):\n"
                               "    pass\n\ndef kernel_function(x):\n    add_kernel[(1,)](x, 4)\n"),
            "add_kernel");
  EXPECT_EQ(derive_kernel_name("from triton import jit\n@jit\ndef k2(a):\n    pass\n"), "k2");
  EXPECT_EQ(derive_kernel_name("@triton.jit(do_not_specialize=['n'])\ndef k3(a, n):\n    pass\n"), "k3");
  // Two jit functions, neither visibly launched: no guess.
  EXPECT_EQ(derive_kernel_name("@triton.jit\ndef a(x):\n    pass\n@triton.jit\ndef b(x):\n    pass\n"), std::nullopt);
  EXPECT_EQ(derive_kernel_name("def kernel_function(x):\n    return x\n"), std::nullopt);
  // A commented-out decorator is not a decorator.
  EXPECT_EQ(derive_kernel_name("# @triton.jit\ndef f(x):\n    pass\n"), std::nullopt);
}

TEST(ProfileRunner, NextCommandTimeoutIsItsShareCutToWhatIsLeft) {
  EXPECT_DOUBLE_EQ(*next_command_timeout(84, 600, 0), 84);
  EXPECT_DOUBLE_EQ(*next_command_timeout(84, 600, 550), 49.5);  // 600 - 550 - 0.5 s kill grace
  EXPECT_EQ(next_command_timeout(84, 600, 599), std::nullopt);  // under a second left: exhausted
  EXPECT_EQ(next_command_timeout(1, 10, 12), std::nullopt);
}

// ---- ROCm -----------------------------------------------------------------------------------------

TEST(ProfileRunnerRocm, SuccessWritesTheKernelTheLauncherTheRecordsAndTheMetrics) {
  runner_case c("rocm", "rocm_mi300x_matvec");
  auto r = c.run();
  ASSERT_TRUE(r.ok) << r.error << "\n" << r.output_tail;
  EXPECT_EQ(r.platform, "rocm");
  EXPECT_EQ(r.kernel_name, "matvec_kernel");
  EXPECT_DOUBLE_EQ(metric(r, "duration_ms"), 1.2);
  EXPECT_NEAR(r.roofline->memory_sol_pct.value(), 67.53, 0.01);
  EXPECT_EQ(r.roofline->vendor, "rocm");
  EXPECT_TRUE(r.error.empty());

  // The kernel and a launcher that runs the harness wrapper on it with the problem.
  EXPECT_EQ(read_file(c.dir("w0_r1_sol_kernel.py")), c.req.code);
  auto launcher = read_file(c.dir("w0_r1_sol_wrapper.py"));
  for (const std::string& part : {std::string(KAGENT_SOURCE_DIR) + "/harness/profile_wrapper.py", c.req.problem_path,
                                  c.dir("w0_r1_sol_kernel.py"), std::string("\"--device\", \"cpu\"")})
    EXPECT_NE(launcher.find(part), std::string::npos) << part << "\n" << launcher;

  // Stats + six counter groups, each with its argv, exit, timeout share and the files it wrote.
  EXPECT_EQ(record_names(r), (std::vector<std::string>{"stats pass", "PMC pass 1", "PMC pass 2", "PMC pass 3",
                                                       "PMC pass 4", "PMC pass 5", "PMC pass 6"}));
  auto lines = log_lines(c.dir("invocations.jsonl"));
  ASSERT_EQ(lines.size(), r.records.size());
  auto log = c.log();
  ASSERT_EQ(log.size(), r.records.size());
  for (size_t i = 0; i < r.records.size(); ++i) {
    const auto& rec = r.records[i];
    EXPECT_TRUE(rec.started);
    EXPECT_EQ(rec.exit_code, 0);
    EXPECT_EQ(rec.term_signal, 0);
    EXPECT_FALSE(rec.timed_out);
    // Decided when the command starts: what is left less the later passes' reserves, so fast passes
    // leave each command far more than the old worst-case share (9 commands with the EA fallbacks).
    EXPECT_LE(rec.start_s + rec.timeout_s, 600.0 - 0.5 + 1e-3) << rec.name;
    EXPECT_GT(rec.timeout_s, (600.0 - 9) / 9) << rec.name;
    EXPECT_EQ(rec.verdict, "accepted");
    EXPECT_FALSE(rec.produced_files.empty()) << rec.name;
    for (const auto& f : rec.produced_files) {
      EXPECT_TRUE(under(f, c.req.dir)) << f;
      EXPECT_TRUE(fs::exists(f)) << f;
    }
    EXPECT_EQ(lines[i].at("name"), rec.name);
    EXPECT_EQ(lines[i].at("argv").get<std::vector<std::string>>(), rec.argv);
    EXPECT_EQ(lines[i].at("exit_code"), 0);
    EXPECT_EQ(lines[i].at("timed_out"), false);
    EXPECT_EQ(lines[i].at("produced_files").get<std::vector<std::string>>(), rec.produced_files);
    // What the fake saw: the same command, run in the profile directory.
    auto seen = log[i].at("argv").get<std::vector<std::string>>();
    EXPECT_EQ(std::vector<std::string>(seen.begin() + 1, seen.end()),
              std::vector<std::string>(rec.argv.begin() + 1, rec.argv.end()));
    EXPECT_EQ(fs::canonical(log[i].at("cwd").get<std::string>()), fs::canonical(c.req.dir));
    if (i > 0) {
      EXPECT_GE(rec.start_s, r.records[i - 1].start_s + r.records[i - 1].wall_s - 1e-9);
    }
  }
  EXPECT_EQ(r.records[0].produced_files.size(), 4u);  // kernel_stats, kernel_trace, agent_info, domain_stats

  auto m = nlohmann::json::parse(read_file(c.dir("metrics.json")));
  EXPECT_EQ(m.at("ok"), true);
  EXPECT_EQ(m.at("metrics"), nlohmann::json(r.metrics));
  EXPECT_EQ(m.at("kernel_name"), "matvec_kernel");
  EXPECT_EQ(m.at("roofline"), nlohmann::json(*r.roofline));
  EXPECT_EQ(m.at("detail").at("dispatch").at("dispatch_id"), 9);  // the measured call after 3 warm-ups
}

TEST(ProfileRunnerRocm, HangInAPmcPassTimesOutWithinTheBudgetAndLeavesNoProcess) {
  runner_case c("rocm", "rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_FETCH_SIZE", "hang"}}, 10);
  auto r = c.run();
  EXPECT_FALSE(r.ok);
  static const std::regex timed_out(R"(^rocprof PMC pass 5 timed out after [0-9.]+ s$)");
  EXPECT_TRUE(std::regex_match(r.error, timed_out)) << r.error;
  EXPECT_EQ(r.invocation, "PMC pass 5");
  ASSERT_EQ(r.records.size(), 6u);
  EXPECT_TRUE(r.records.back().timed_out);
  // The hanging pass got what was left of the 10 s less the reserve of the one pass after it.
  EXPECT_GT(r.records.back().timeout_s, 1.0);
  EXPECT_LE(r.records.back().start_s + r.records.back().timeout_s, 10.0 - 0.5 + 1e-3);
  EXPECT_EQ(r.records.back().verdict, "failed: " + r.error);
  expect_nothing_left(c.log());
  // A failed profile still leaves its records and an outcome file.
  EXPECT_EQ(log_lines(c.dir("invocations.jsonl")).size(), 6u);
  auto m = nlohmann::json::parse(read_file(c.dir("metrics.json")));
  EXPECT_EQ(m.at("ok"), false);
  EXPECT_EQ(m.at("error"), r.error);
  EXPECT_FALSE(r.roofline.has_value());
  EXPECT_TRUE(r.metrics.empty());
}

TEST(ProfileRunnerRocm, SignalNonZeroExitAndNoCsvInAPmcPass) {
  runner_case sig("rocm", "rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_SQ_WAVES", "signal"}});
  auto r = sig.run();
  EXPECT_EQ(r.error, "rocprof PMC pass 1 failed (rc=-11, killed by signal 11)");
  EXPECT_EQ(r.records.back().term_signal, 11);
  EXPECT_EQ(r.invocation, "PMC pass 1");

  runner_case rc("rocm", "rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_TCC_HIT_sum", "exit_nonzero"}});
  auto r2 = rc.run();
  EXPECT_EQ(r2.error, "rocprof PMC pass 2 failed (rc=3)");
  EXPECT_EQ(r2.records.back().exit_code, 3);
  EXPECT_NE(r2.output_tail.find("fault injected"), std::string::npos) << r2.output_tail;

  runner_case none("rocm", "rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_TCC_HIT_sum", "no_csv"}});
  EXPECT_EQ(none.run().error, "rocprof PMC pass 2 failed (rc=0): rocprof completed without a usable CSV");
}

TEST(ProfileRunnerRocm, StatsPassFaults) {
  runner_case rc("rocm", "rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_STATS", "exit_nonzero"}});
  auto r = rc.run();
  EXPECT_EQ(r.error, "rocprof stats pass failed (rc=3)");
  EXPECT_EQ(r.invocation, "stats pass");
  EXPECT_EQ(r.records.size(), 1u);

  runner_case none("rocm", "rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_STATS", "no_csv"}});
  EXPECT_EQ(none.run().error, "rocprof completed without a usable CSV");

  runner_case hang("rocm", "rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_STATS", "hang"}}, 10);
  auto h = hang.run();
  static const std::regex stats_timed_out(R"(^rocprof stats pass timed out after [0-9.]+ s$)");
  EXPECT_TRUE(std::regex_match(h.error, stats_timed_out)) << h.error;
  expect_nothing_left(hang.log());

  // The program's own failure fails the pass (the fake runs it and returns its status).
  runner_case prog("rocm", "rocm_mi300x_matvec", {{"FAKE_ROCPROF_RUN_PROGRAM", "1"}});
  prog.req.python = "false";
  EXPECT_EQ(prog.run().error, "rocprof stats pass failed (rc=1)");
}

TEST(ProfileRunnerRocm, EmptyAndStaleCountersAndPartialOnes) {
  runner_case empty("rocm", "rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_FETCH_SIZE", "empty_csv"}});
  auto r = empty.run();
  EXPECT_EQ(r.error, "rocprof PMC pass 5 failed (rc=0): rocprof PMC CSV has no counter rows");
  EXPECT_EQ(r.records.back().produced_files.size(), 1u);  // the zero-byte CSV

  // A counter file left by an earlier kernel under this prefix is deleted first, never read.
  runner_case stale("rocm", "rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_WRITE_SIZE", "stale"}});
  const std::string planted = stale.dir("pmc_1/w0_r1_sol_pass5_0_counter_collection.csv");
  write_file(planted, "Dispatch_Id,Kernel_Name,Counter_Name,Counter_Value\n9,matvec_kernel,WRITE_SIZE,1\n");
  auto s = stale.run();
  EXPECT_EQ(s.error, "rocprof PMC pass 6 failed (rc=0): rocprof completed without a usable CSV");
  EXPECT_FALSE(fs::exists(planted));
  EXPECT_TRUE(s.records.back().produced_files.empty());

  runner_case partial("rocm", "rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_SQ_WAVES", "partial"}});
  auto p = partial.run();
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.metrics.count("sq_waves"), 1u);
  EXPECT_EQ(p.metrics.count("sq_insts_valu"), 0u);  // absent, never 0
}

TEST(ProfileRunnerRocm, StatsWithoutAverageNsIsRejected) {
  runner_case c("rocm", "rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_STATS", "no_average"}});
  auto r = c.run();
  EXPECT_EQ(r.error, "rocprof stats CSV has no AverageNs");
  EXPECT_EQ(r.invocation, "stats pass");
  EXPECT_EQ(r.records.size(), 1u);
}

TEST(ProfileRunnerRocm, Ea0NamesRejectedOnGfx90aUseTheAlternative) {
  runner_case c("rocm", "rocm_gfx90a_matvec", {{"FAKE_ROCPROF_ARCH", "gfx90a"}});
  auto r = c.run();
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(record_names(r),
            (std::vector<std::string>{"stats pass", "PMC pass 1", "PMC pass 2", "PMC pass 3", "PMC pass 3 (alt 2)",
                                      "PMC pass 4", "PMC pass 4 (alt 2)", "PMC pass 5", "PMC pass 6"}));
  EXPECT_EQ(r.records[3].verdict, "rejected: rocprof PMC pass 3 failed (rc=1); trying the next counter name");
  EXPECT_EQ(r.records[3].exit_code, 1);
  EXPECT_EQ(r.records[4].verdict, "accepted");
  EXPECT_DOUBLE_EQ(metric(r, "tcc_ea_rdreq"), 33'554'432);
  EXPECT_EQ(r.detail.at("_raw_counters").count("TCC_EA0_RDREQ_sum"), 0u);
}

TEST(ProfileRunnerRocm, SlowButWithinTheBudgetIsAccepted) {
  runner_case c("rocm", "rocm_mi300x_matvec",
                {{"FAKE_ROCPROF_FAULT_FETCH_SIZE", "slow"}, {"FAKE_ROCPROF_SLOW_S", "0.3"}});
  auto r = c.run();
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.records[5].name, "PMC pass 5");
  EXPECT_EQ(r.records[5].verdict, "accepted");
  EXPECT_EQ(r.metrics.count("fetch_size_kb"), 1u);
}

TEST(ProfileRunnerBudget, FairTimeoutKeepsAReserveForThePassesStillToCome) {
  // Nothing ran yet: 7 commands in all (this one and 6 after it) over 700 s: an even split is 100 s;
  // each later pass reserves half of that, so this one gets 700 - 6 * 50 = 400 s.
  EXPECT_DOUBLE_EQ(fair_command_timeout(700, 6, 0, 0), 400);
  EXPECT_DOUBLE_EQ(fair_command_timeout(700, 6, 0, 300), 300);  // the per-command cap
  // After a 10 s stats pass each later pass reserves 21 s: the next gets 600 - 5 * 21 = 495 s.
  EXPECT_DOUBLE_EQ(fair_command_timeout(600, 5, 10, 0), 495);
  // Reserves larger than what is left: never less than an even split of it.
  EXPECT_DOUBLE_EQ(fair_command_timeout(60, 5, 30, 0), 10);
  // The last command gets everything that is left.
  EXPECT_DOUBLE_EQ(fair_command_timeout(42, 0, 30, 0), 42);
  EXPECT_DOUBLE_EQ(fair_command_timeout(0, 3, 1, 0), 0);
}

TEST(ProfileRunnerRocm, OneSlowPassTakesMoreThanAWorstCaseShareOfTheBudget) {
  // 30 s for 9 worst-case commands used to give each (30 - 9) / 9 = 2.3 s, so a stats pass of 3.5 s
  // was killed and the device turned synthetic. Now the first command may take most of the budget.
  runner_case c("rocm", "rocm_mi300x_matvec",
                {{"FAKE_ROCPROF_FAULT_STATS", "slow"}, {"FAKE_ROCPROF_SLOW_S", "3.5"}}, 30.0);
  auto r = c.run();
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_FALSE(r.records.empty());
  EXPECT_EQ(r.records[0].name, "stats pass");
  EXPECT_EQ(r.records[0].verdict, "accepted");
  EXPECT_GT(r.records[0].timeout_s, 3.5);
  for (const auto& rec : r.records) EXPECT_LE(rec.start_s + rec.timeout_s, 30.0 + 1e-9) << rec.name;
}

TEST(ProfileRunnerRocm, AnExhaustedBudgetFailsCleanlyAndNoCommandOutlivesIt) {
  // 2.3 s for 9 worst-case commands: each gets the 1 s floor, cut to what is left; the slow stats pass
  // spends most of it.
  const double budget = 2.3;
  runner_case c("rocm", "rocm_mi300x_matvec",
                {{"FAKE_ROCPROF_FAULT_STATS", "slow"}, {"FAKE_ROCPROF_SLOW_S", "0.6"}}, budget);
  auto r = c.run();
  EXPECT_FALSE(r.ok);
  static const std::regex exhausted(R"(^rocprof profile budget of 2\.3 s exhausted before (stats pass|PMC pass \d)( \(alt 2\))? \(\d+\.\d s used\)$)");
  static const std::regex timed_out(R"(^rocprof (stats|PMC) pass( \d)? timed out after [0-9.]+ s$)");
  // Which of the two ends it depends on the machine's speed; both are the budget at work.
  EXPECT_TRUE(std::regex_match(r.error, exhausted) || std::regex_match(r.error, timed_out)) << r.error;
  EXPECT_LT(r.records.size(), 7u);
  for (const auto& rec : r.records) EXPECT_LE(rec.start_s + rec.timeout_s + 0.5, budget + 1e-9) << rec.name;
  if (std::regex_match(r.error, exhausted)) {
    // No record for the command that never started; the failure names it.
    EXPECT_EQ(r.error.find("before " + r.invocation + " ("), r.error.find("before "));
    EXPECT_TRUE(r.output_tail.empty());
  }
}

TEST(ProfileRunnerRocm, KernelNameAndBinaryChoices) {
  // An explicit name wins over the busiest-kernel rule.
  runner_case named("rocm", "rocm_mi300x_matvec");
  named.req.kernel_name = "matvec_finalize_kernel";
  auto r = named.run();
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.kernel_name, "matvec_finalize_kernel");
  EXPECT_DOUBLE_EQ(metric(r, "duration_ms"), 0.02);

  // Code without a recognisable kernel: the busiest non-at:: kernel.
  runner_case busiest("rocm", "rocm_mi300x_matvec");
  busiest.req.code = "def kernel_function(x):\n    return x\n";
  EXPECT_EQ(busiest.run().kernel_name, "matvec_kernel");

  // platform_kwargs.rocprof_bin_path, with the fakes off PATH.
  runner_case configured("rocm", "rocm_mi300x_matvec");
  configured.req.env["PATH"] = "/usr/bin:/bin";
  configured.req.kwargs.rocprof_bin_path = fakes_dir() + "/rocprofv3";
  auto k = configured.run();
  ASSERT_TRUE(k.ok) << k.error;
  EXPECT_EQ(k.records[0].argv[0], fakes_dir() + "/rocprofv3");

  runner_case missing("rocm", "rocm_mi300x_matvec");
  missing.req.kwargs.rocprof_bin_path = missing.root / "no-such-rocprofv3";
  auto m = missing.run();
  EXPECT_FALSE(m.ok);
  EXPECT_EQ(m.invocation, "setup");
  EXPECT_NE(m.error.find("platform_kwargs.rocprof_bin_path"), std::string::npos) << m.error;
  EXPECT_TRUE(m.records.empty());
  EXPECT_TRUE(missing.log().empty());
}

TEST(ProfileRunnerRocm, RelativePathsStillWorkFromTheProfileDirectory) {
  // The tools run in the profile directory; paths configured relative to ours must not break there.
  runner_case c("rocm", "rocm_mi300x_matvec", {{"FAKE_ROCPROF_RUN_PROGRAM", "1"}});
  c.req.env["PATH"] = "/usr/bin:/bin";
  c.req.kwargs.rocprof_bin_path = fs::relative(fakes_dir() + "/rocprofv3").string();
  c.req.install_root = fs::relative(KAGENT_SOURCE_DIR).string();
  c.req.problem_path = fs::relative(c.req.problem_path).string();
  const std::string py = c.root / "py.sh";  // stands in for python: records the launcher it is given
  write_file(py, "#!/bin/sh\necho \"$1\" >> " + (c.root / "launched.txt") + "\n");
  fs::permissions(py, fs::perms::owner_all);
  c.req.python = fs::relative(py).string();
  ASSERT_NE(c.req.python.find('/'), std::string::npos);
  auto r = c.run();
  ASSERT_TRUE(r.ok) << r.error << "\n" << r.output_tail;
  EXPECT_EQ(r.records[0].argv[0], fakes_dir() + "/rocprofv3");
  EXPECT_EQ(read_file(c.root / "launched.txt").substr(0, c.dir("w0_r1_sol_wrapper.py").size()),
            c.dir("w0_r1_sol_wrapper.py"));
  auto launcher = read_file(c.dir("w0_r1_sol_wrapper.py"));
  EXPECT_NE(launcher.find("[\"" + std::string(KAGENT_SOURCE_DIR) + "/harness/profile_wrapper.py\""), std::string::npos)
      << launcher;
  EXPECT_NE(launcher.find("\"" + matvec_dir() + "/problem.py\""), std::string::npos) << launcher;
}

TEST(ProfileRunnerRocm, NoSpecRowMeansNoRooflineButTheMetricsStay) {
  runner_case none("rocm", "rocm_mi300x_matvec");
  none.req.gpu_name = "";
  auto r = none.run();
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_FALSE(r.roofline.has_value());
  EXPECT_DOUBLE_EQ(metric(r, "duration_ms"), 1.2);
  ASSERT_FALSE(r.notes.empty());

  runner_case other("rocm", "rocm_mi300x_matvec");
  other.req.gpu_name = "NVIDIA H200";
  EXPECT_FALSE(other.run().roofline.has_value());

  runner_case isa("rocm", "rocm_mi300x_matvec");
  isa.req.gpu_name = "gfx942";  // resolved to the MI300X row
  EXPECT_NEAR(isa.run().roofline->memory_sol_pct.value(), 67.53, 0.01);
}

TEST(ProfileRunner, SetupFailuresComeBackAsOutcomes) {
  runner_case cpu("rocm", "rocm_mi300x_matvec");
  cpu.req.platform = "cpu";
  auto r = cpu.run();
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "profiler platform 'cpu' cannot profile (expected rocm or nvidia)");
  EXPECT_EQ(r.invocation, "setup");

  runner_case no_problem("rocm", "rocm_mi300x_matvec");
  no_problem.req.problem_path = no_problem.root / "missing.py";
  auto p = no_problem.run();
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.error.find("problem file not found"), std::string::npos) << p.error;
  EXPECT_TRUE(no_problem.log().empty());

  runner_case no_code("rocm", "rocm_mi300x_matvec");
  no_code.req.code = "";
  auto k = no_code.run();
  EXPECT_EQ(k.error, "the profile request has no kernel code");
  EXPECT_EQ(k.invocation, "setup");
  EXPECT_TRUE(no_code.log().empty());
}

// ---- NVIDIA ---------------------------------------------------------------------------------------

TEST(ProfileRunnerNcu, SuccessRecordsOneInvocationUnderTheWholeBudget) {
  runner_case c("nvidia", "ncu_h200_matvec");
  auto r = c.run();
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.records.size(), 1u);
  const auto& rec = r.records[0];
  EXPECT_EQ(rec.name, "ncu");
  EXPECT_EQ(rec.argv[0], fakes_dir() + "/ncu");
  EXPECT_EQ(rec.argv.back(), c.dir("w0_r1_sol_wrapper.py"));
  EXPECT_NEAR(rec.timeout_s, 599, 1e-9);  // one command: the budget less a second for the kill
  EXPECT_EQ(rec.produced_files, std::vector<std::string>{c.dir("w0_r1_sol_ncu.csv")});
  EXPECT_EQ(r.kernel_name, "matvec_kernel");
  EXPECT_EQ(r.roofline->vendor, "nvidia");
  EXPECT_EQ(log_lines(c.dir("invocations.jsonl")).size(), 1u);
  EXPECT_EQ(fs::canonical(c.log().at(0).at("cwd").get<std::string>()), fs::canonical(c.req.dir));

  // The roofline needs no spec row on NVIDIA: ncu measures against the device's own peaks.
  runner_case unnamed("nvidia", "ncu_h200_matvec");
  unnamed.req.gpu_name = "";
  EXPECT_DOUBLE_EQ(unnamed.run().roofline->memory_sol_pct.value(), 12.41);
}

TEST(ProfileRunnerNcu, HangSignalAndExitFaults) {
  runner_case hang("nvidia", "ncu_h200_matvec", {{"FAKE_NCU_FAULT", "hang"}}, 3);
  auto h = hang.run();
  EXPECT_EQ(h.error, "ncu timed out after 2 s");
  EXPECT_TRUE(h.records.at(0).timed_out);
  expect_nothing_left(hang.log());

  runner_case sig("nvidia", "ncu_h200_matvec", {{"FAKE_NCU_FAULT", "signal"}});
  auto s = sig.run();
  EXPECT_EQ(s.error.rfind("ncu failed with return code -11: ", 0), 0u) << s.error;
  EXPECT_EQ(s.records.at(0).term_signal, 11);

  runner_case rc("nvidia", "ncu_h200_matvec", {{"FAKE_NCU_FAULT", "exit_nonzero"}});
  auto e = rc.run();
  EXPECT_EQ(e.error.rfind("ncu failed with return code 1: ==ERROR== An error was reported by the driver", 0), 0u)
      << e.error;
  EXPECT_EQ(e.invocation, "ncu");
  EXPECT_NE(e.output_tail.find("fault injected"), std::string::npos);

  runner_case slow("nvidia", "ncu_h200_matvec", {{"FAKE_NCU_FAULT", "slow"}, {"FAKE_NCU_SLOW_S", "0.2"}});
  EXPECT_TRUE(slow.run().ok);
}

TEST(ProfileRunnerNcu, MissingEmptyStaleAndKernellessCsv) {
  runner_case none("nvidia", "ncu_h200_matvec", {{"FAKE_NCU_FAULT", "no_csv"}});
  EXPECT_EQ(none.run().error, "ncu completed without a CSV (" + none.dir("w0_r1_sol_ncu.csv") + ")");

  runner_case stale("nvidia", "ncu_h200_matvec", {{"FAKE_NCU_FAULT", "stale"}});
  write_file(stale.dir("w0_r1_sol_ncu.csv"), read_file(fixture("ncu_h200_matvec/ncu_raw.csv")));
  auto s = stale.run();
  EXPECT_EQ(s.error, "ncu completed without a CSV (" + stale.dir("w0_r1_sol_ncu.csv") + ")");
  EXPECT_TRUE(s.records.at(0).produced_files.empty());

  runner_case empty("nvidia", "ncu_h200_matvec", {{"FAKE_NCU_FAULT", "empty_csv"}});
  EXPECT_EQ(empty.run().error, "ncu CSV is likely empty (" + empty.dir("w0_r1_sol_ncu.csv") + ")");

  runner_case nothing("nvidia", "ncu_h200_matvec", {{"FAKE_NCU_FAULT", "no_kernels"}});
  EXPECT_EQ(nothing.run().error, "ncu profiled no kernel: the filter --kernel-name matvec_kernel matched no launch (" +
                                     nothing.dir("w0_r1_sol_ncu.csv") + ")");

  runner_case perm("nvidia", "ncu_h200_matvec", {{"FAKE_NCU_FAULT", "permission"}});
  auto p = perm.run();
  EXPECT_NE(p.error.find("ERR_NVGPUCTRPERM"), std::string::npos) << p.error;
  EXPECT_NE(p.error.find("KAGENT_NCU_USE_SUDO=1"), std::string::npos) << p.error;
}

TEST(ProfileRunnerNcu, WithoutAKnownKernelThereIsNoFilter) {
  runner_case c("nvidia", "ncu_h200_matvec");
  c.req.code = "def kernel_function(x):\n    return x\n";
  auto r = c.run();
  ASSERT_TRUE(r.ok) << r.error;
  const auto& argv = r.records.at(0).argv;
  EXPECT_EQ(std::find(argv.begin(), argv.end(), "--kernel-name"), argv.end());
  EXPECT_EQ(r.kernel_name, "matvec_kernel");  // the busiest non-at:: kernel
}

TEST(ProfileRunnerNcu, RealH200OutputOfTheWrapperSelectsTheMeasuredCall) {
  // ncu's own output for the runner's command on the lent H200 (tests/profiling/h200_wrapper/README.md).
  const std::string captured = std::string(KAGENT_SOURCE_DIR) + "/tests/profiling/h200_wrapper/";
  runner_case matvec("nvidia", "unused", {{"FAKE_NCU_FIXTURES", captured + "matvec"}});
  auto r = matvec.run();
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.kernel_name, "matvec_kernel");
  EXPECT_EQ(r.detail.at("dispatch_count"), 4);  // 3 warm-ups and the measured call, nothing else
  EXPECT_EQ(r.detail.at("id"), 3);
  EXPECT_DOUBLE_EQ(metric(r, "gpu__time_duration.sum"), 2413600);
  EXPECT_DOUBLE_EQ(r.roofline->memory_sol_pct.value(), 37.02);
  EXPECT_EQ(r.roofline->bottleneck, "underutilized");

  runner_case rms("nvidia", "unused", {{"FAKE_NCU_FIXTURES", captured + "rmsnorm"}});
  rms.req.code = read_file(std::string(KAGENT_SOURCE_DIR) + "/examples/optimize_02_rmsnorm/input.py");
  auto n = rms.run();
  ASSERT_TRUE(n.ok) << n.error;
  EXPECT_EQ(n.kernel_name, "rmsnorm_kernel");
  EXPECT_EQ(n.detail.at("id"), 3);
  EXPECT_DOUBLE_EQ(n.roofline->memory_sol_pct.value(), 94.68);
  EXPECT_EQ(n.roofline->bottleneck, "memory");
}

// ---- several kernels in one ncu process (profile_kernels) -------------------------------------------

namespace {

/// A kernel whose launched @triton.jit function is matvec_splitk_kernel (the fake does not run it).
const char* splitk_code =
    "import triton\n\n@triton.jit\ndef matvec_splitk_kernel(x):\n    pass\n\n"
    "def kernel_function(x):\n    matvec_splitk_kernel[(1,)](x)\n    return x\n";

/// Two requests on the batch fixture: the starting kernel (k0) and a split-K one (k1).
struct batch_case {
  runner_case a;
  kernel_profile_request b;
  explicit batch_case(const std::map<std::string, std::string>& extra = {}) : a("nvidia", "ncu_batch_matvec", extra) {
    a.req.kernel_id = "parent_r1_c0";
    a.req.dir = a.root / "candidates/r1_c0/profile_parent_r1_c0";
    b = a.req;
    b.code = splitk_code;
    b.kernel_id = "parent_r1_c3";
    b.dir = a.root / "candidates/r1_c3/profile_parent_r1_c3";
  }
  std::vector<kernel_profile_outcome> run() const { return profile_kernels({a.req, b}); }
  std::vector<nlohmann::json> invocations(const kernel_profile_request& r) const {
    return log_lines(r.dir + "/invocations.jsonl");
  }
  std::vector<nlohmann::json> fake_calls() const { return log_lines(a.root / "fake.log"); }
};

} // namespace

TEST(ProfileRunnerNcuBatch, TwoKernelsShareOneNcuProcessAndEachGetsItsOwnMeasuredLaunch) {
  batch_case c;
  auto out = c.run();
  ASSERT_EQ(out.size(), 2u);
  ASSERT_TRUE(out[0].ok) << out[0].error;
  ASSERT_TRUE(out[1].ok) << out[1].error;
  const auto calls = c.fake_calls();
  ASSERT_EQ(calls.size(), 1u) << "one profiler process for both kernels";
  const auto argv = calls[0]["argv"].get<std::vector<std::string>>();
  auto k = std::find(argv.begin(), argv.end(), "--kernel-name");
  ASSERT_NE(k, argv.end());
  EXPECT_EQ(*(k + 1), "regex:^(kagent_batch_marker|matvec_kernel|matvec_splitk_kernel)$");
  // Each kernel: its own measured launch (the last of its name after its marker), metrics, roofline.
  EXPECT_EQ(out[0].kernel_name, "matvec_kernel");
  EXPECT_EQ(out[0].detail.at("id").get<long long>(), 4);
  EXPECT_DOUBLE_EQ(out[0].metrics.at("gpu__time_duration.sum"), 2418592);
  EXPECT_EQ(out[1].kernel_name, "matvec_splitk_kernel");
  EXPECT_EQ(out[1].detail.at("id").get<long long>(), 9);
  EXPECT_DOUBLE_EQ(out[1].metrics.at("gpu__time_duration.sum"), 1004512);
  EXPECT_EQ(out[1].detail.at("batch").at("index").get<int>(), 1);
  ASSERT_TRUE(out[0].roofline && out[1].roofline);
  // Each kernel's directory holds its record of the shared invocation, its kernel and metrics.json.
  for (const auto* r : {&c.a.req, &c.b}) {
    const auto inv = c.invocations(*r);
    ASSERT_EQ(inv.size(), 1u) << r->dir;
    EXPECT_EQ(inv[0]["name"], "ncu (batch of 2)");
    EXPECT_EQ(inv[0]["verdict"].get<std::string>().rfind("accepted (kernel ", 0), 0u) << inv[0].dump();
    EXPECT_TRUE(std::filesystem::exists(r->dir + "/metrics.json"));
    EXPECT_TRUE(std::filesystem::exists(r->dir + "/" + r->kernel_id + "_kernel.py"));
  }
  // The launcher runs the wrapper's batch mode on both kernels.
  const auto batch_dir = c.a.root / "candidates/r1_c0/batch_parent_r1_c0";
  const auto launcher = read_file(batch_dir + "/batch_parent_r1_c0_wrapper.py");
  EXPECT_NE(launcher.find("\"--batch\", \"k0="), std::string::npos) << launcher;
  EXPECT_NE(launcher.find("\"--batch\", \"k1="), std::string::npos) << launcher;
  EXPECT_EQ(launcher.find("\"--kernel\""), std::string::npos);
}

TEST(ProfileRunnerNcuBatch, ABatchThatDiesFailsNoKernelEachIsProfiledOnItsOwn) {
  // ncu dies of a signal in the batch only (its log file is batch_*): both kernels are profiled again
  // alone, with the batch's record first in their invocations.
  batch_case c({{"FAKE_NCU_FAULT", "signal"}, {"FAKE_NCU_FAULT_ONLY_IN", "batch_"}});
  auto out = c.run();
  ASSERT_TRUE(out[0].ok) << out[0].error;
  ASSERT_TRUE(out[1].ok) << out[1].error;
  EXPECT_EQ(c.fake_calls().size(), 3u);
  EXPECT_EQ(out[1].kernel_name, "matvec_splitk_kernel");
  for (const auto* r : {&c.a.req, &c.b}) {
    const auto inv = c.invocations(*r);
    ASSERT_EQ(inv.size(), 2u);
    EXPECT_EQ(inv[0]["verdict"].get<std::string>().rfind("rejected: ", 0), 0u) << inv[0].dump();
    EXPECT_NE(inv[0]["verdict"].get<std::string>().find("profiled on its own"), std::string::npos);
    EXPECT_EQ(inv[1]["name"], "ncu");
    EXPECT_EQ(inv[1]["verdict"], "accepted");
  }
}

TEST(ProfileRunnerNcuBatch, AKernelMissingFromTheBatchIsTheOnlyOneProfiledAgainAndItsFailureStaysItsOwn) {
  // The second kernel launches a kernel the batch's output never lists: the first is attributed from
  // the batch; the second is profiled alone and fails with its own error, under its own budget.
  batch_case c;
  c.b.kernel_name = "no_such_kernel";
  auto out = c.run();
  ASSERT_TRUE(out[0].ok) << out[0].error;
  EXPECT_FALSE(out[1].ok);
  EXPECT_NE(out[1].error.find("no_such_kernel"), std::string::npos) << out[1].error;
  EXPECT_EQ(c.fake_calls().size(), 2u);
  EXPECT_EQ(c.invocations(c.a.req).size(), 1u);
  EXPECT_EQ(c.invocations(c.b).size(), 2u);
}

TEST(ProfileRunnerNcuBatch, OneRequestOrRequestsThatDifferAreProfiledOneByOne) {
  batch_case c;
  auto one = profile_kernels({c.a.req});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_TRUE(one[0].ok) << one[0].error;
  EXPECT_EQ(c.fake_calls().size(), 1u);
  c.b.dtype = "float16";  // another set of inputs: no shared process
  auto two = profile_kernels({c.a.req, c.b});
  EXPECT_EQ(c.fake_calls().size(), 3u);
  for (const auto& call : c.fake_calls()) {
    const auto argv = call["argv"].get<std::vector<std::string>>();
    EXPECT_EQ(std::find(argv.begin(), argv.end(), "regex:^(kagent_batch_marker|matvec_kernel|matvec_splitk_kernel)$"),
              argv.end());
  }
}

// ---- the profile cache (platform/profiling/profile_cache) --------------------------------------------

TEST(ProfileCache, TheCacheRootComesFromTheEnvironment) {
  EXPECT_EQ(default_cache_root({{"KAGENT_CACHE_DIR", "/c"}, {"HOME", "/h"}}), std::filesystem::path("/c"));
  EXPECT_EQ(default_cache_root({{"KAGENT_CACHE_DIR", "off"}, {"HOME", "/h"}}), std::filesystem::path());
  EXPECT_EQ(default_cache_root({{"XDG_CACHE_HOME", "/x"}, {"HOME", "/h"}}), std::filesystem::path("/x/kagent-actors"));
  EXPECT_EQ(default_cache_root({{"HOME", "/h"}}), std::filesystem::path("/h/.cache/kagent-actors"));
  EXPECT_EQ(default_cache_root({}), std::filesystem::path());
}

TEST(ProfileCache, AKernelProfiledBeforeComesFromTheCacheWithoutRunningTheTool) {
  runner_case c("nvidia", "ncu_h200_matvec");
  c.req.cache_root = c.root / "cache";
  auto first = c.run();
  ASSERT_TRUE(first.ok) << first.error;
  EXPECT_EQ(log_lines(c.root / "fake.log").size(), 1u);
  EXPECT_FALSE(first.detail.contains("cached"));

  // Another run, another directory: the same kernel on the same problem, tool and GPU.
  auto again = c.req;
  again.kernel_id = "initial_baseline";
  again.dir = c.root / "run2/profile_initial";
  auto second = profile_kernel(again);
  ASSERT_TRUE(second.ok) << second.error;
  EXPECT_EQ(log_lines(c.root / "fake.log").size(), 1u) << "no ncu process for a cached profile";
  EXPECT_TRUE(second.records.empty());
  EXPECT_EQ(second.kernel_name, first.kernel_name);
  EXPECT_EQ(second.metrics, first.metrics);
  ASSERT_TRUE(second.roofline.has_value());
  EXPECT_DOUBLE_EQ(second.roofline->memory_sol_pct.value(), first.roofline->memory_sol_pct.value());
  EXPECT_EQ(second.detail.at("cached").get<std::string>(), profile_cache_key(again));
  ASSERT_FALSE(second.notes.empty());
  EXPECT_NE(second.notes.back().find("from the profile cache"), std::string::npos) << second.notes.back();
  EXPECT_TRUE(std::filesystem::exists(again.dir + "/metrics.json"));
  EXPECT_TRUE(std::filesystem::exists(again.dir + "/initial_baseline_kernel.py"));

  // Another kernel, another GPU model or another dtype is another profile.
  auto other = again;
  other.code += "\n# a different kernel\n";
  EXPECT_NE(profile_cache_key(other), profile_cache_key(again));
  auto gpu = again;
  gpu.gpu_name = "NVIDIA H100";
  EXPECT_NE(profile_cache_key(gpu), profile_cache_key(again));
  auto dtype = again;
  dtype.dtype = "float16";
  EXPECT_NE(profile_cache_key(dtype), profile_cache_key(again));
  ASSERT_TRUE(profile_kernel(other).ok);
  EXPECT_EQ(log_lines(c.root / "fake.log").size(), 2u);
}

TEST(ProfileCache, AFailedProfileIsNotKeptAndNoCacheMeansNoLookup) {
  runner_case c("nvidia", "ncu_h200_matvec", {{"FAKE_NCU_FAULT", "exit_nonzero"}});
  c.req.cache_root = c.root / "cache";
  EXPECT_FALSE(c.run().ok);
  EXPECT_FALSE(std::filesystem::exists(c.root / "cache/profiles") &&
               !std::filesystem::is_empty(c.root / "cache/profiles"));
  runner_case d("nvidia", "ncu_h200_matvec");
  ASSERT_TRUE(d.run().ok);
  ASSERT_TRUE(d.run().ok);
  EXPECT_EQ(log_lines(d.root / "fake.log").size(), 2u) << "without cache_root every profile runs the tool";
}

TEST(ProfileCache, InABatchOnlyTheKernelsNotInTheCacheReachTheProfiler) {
  batch_case c;
  c.a.req.cache_root = c.a.root / "cache";
  c.b.cache_root = c.a.req.cache_root;
  ASSERT_TRUE(profile_kernel(c.a.req).ok);  // the starting kernel, profiled in an earlier run
  EXPECT_EQ(c.fake_calls().size(), 1u);
  auto out = c.run();
  ASSERT_TRUE(out[0].ok && out[1].ok) << out[0].error << out[1].error;
  EXPECT_TRUE(out[0].detail.contains("cached"));
  EXPECT_FALSE(out[1].detail.contains("cached"));
  ASSERT_EQ(c.fake_calls().size(), 2u) << "one more process, for the split-K kernel alone";
  const auto argv = c.fake_calls()[1]["argv"].get<std::vector<std::string>>();
  EXPECT_NE(std::find(argv.begin(), argv.end(), "matvec_splitk_kernel"), argv.end());
}

// The device's release before ncu's report (start_profile_kernels): which processes below the
// profiler's root are its own. The tree of a standby on an H100 (ps samples, 2026-12-07): bwrap through
// the loader, its PID 1, ncu's front-end script under dash, ncu's binary, its TreeLauncherSubreaper,
// and the wrapper (pid 7 in the namespace: what it wrote into standby.ready).
TEST(ProfilerProcesses, TheProfilersOwnAreTheProgramsAncestorsNotWhatCallsItselfNcu) {
  auto entry = [](int pid, int ppid, std::string exe, std::vector<int> nspid, std::string comm = "x") {
    proc_entry p;
    p.pid = pid;
    p.ppid = ppid;
    p.exe = std::move(exe);
    p.nspid = std::move(nspid);
    p.comm = std::move(comm);
    return p;
  };
  const std::string loader = "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2";
  const std::string target = "/opt/nvidia/nsight-compute/2025.3.1/target/linux-desktop-glibc_2_11_3-x64/";
  const std::vector<proc_entry> tree{
      entry(3135, 3115, loader, {3135}),                          // bwrap (the root)
      entry(3147, 3135, loader, {3147, 1}),                       // its PID 1
      entry(3150, 3147, "/usr/bin/dash", {3150, 2}, "ncu"),       // /opt/.../ncu, a script
      entry(3168, 3150, target + "ncu", {3168, 3}, "ncu"),        // ncu's binary
      entry(3209, 3168, target + "TreeLauncherSubreaper", {3209, 6}),
      entry(3213, 3209, "/opt/torch/.venv/bin/python3", {3213, 7}, "python3"),  // the wrapper
  };
  const auto own = profiler_ancestors(tree, 7);
  EXPECT_EQ(own, (std::vector<int>{3209, 3168, 3150, 3147, 3135}));
  auto left = program_processes(tree, own);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].pid, 3213);
  // The wrapper gone: nothing left, the device may be given back.
  auto gone = tree;
  gone.pop_back();
  EXPECT_TRUE(program_processes(gone, own).empty());
  // What it left behind keeps the device, wherever it was reparented and whatever it calls itself or
  // runs: ncu's own binary, bwrap's executable.
  for (const auto& behind : {entry(3300, 3209, "/opt/torch/.venv/bin/python3", {3300, 9}, "ncu"),
                             entry(3301, 3147, target + "ncu", {3301, 10}, "ncu"),
                             entry(3302, 3147, loader, {3302, 11})}) {
    auto t = gone;
    t.push_back(behind);
    left = program_processes(t, own);
    ASSERT_EQ(left.size(), 1u) << behind.pid;
    EXPECT_EQ(left[0].pid, behind.pid);
  }
  // No program of that pid, two of it, or one not below the root: nothing is the profiler's.
  EXPECT_TRUE(profiler_ancestors(tree, 8).empty());
  auto twice = tree;
  twice.push_back(entry(3400, 3147, "/usr/bin/python3", {3400, 7}));
  EXPECT_TRUE(profiler_ancestors(twice, 7).empty());
  auto outside = tree;
  outside.back().ppid = 1;
  EXPECT_TRUE(profiler_ancestors(outside, 7).empty());
  EXPECT_TRUE(profiler_ancestors({}, 7).empty());
}
