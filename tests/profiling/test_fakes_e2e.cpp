// End to end against tests/fakes/rocprofv3 and tests/fakes/ncu: plan -> run every invocation the way
// the profiler actor does (delete expected outputs, write the input file, run under its timeout,
// judge, fall back) -> parse -> roofline. Also exercises every fault mode the fakes offer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "platform/gpu/specs.hpp"
#include "platform/nvidia/ncu_parse.hpp"
#include "platform/nvidia/ncu_plan.hpp"
#include "platform/nvidia/nvidia_roofline.hpp"
#include "platform/rocm/profile_common.hpp"
#include "platform/rocm/rocm_roofline.hpp"
#include "platform/rocm/rocprof_parse.hpp"
#include "platform/rocm/rocprof_plan.hpp"
#include "test_support.hpp"

using namespace kagent;
using namespace kagent::test;

namespace {

struct rocprof_run {
  std::optional<rocprof_profile> profile;
  std::string error;
  std::vector<std::string> ran;  // prefixes, in order
};

env_map with_overrides(env_map env, const std::map<std::string, std::string>& o) {
  for (const auto& [k, v] : o) env[k] = v;
  return env;
}

tool_exit exit_of(const process_result& r, double timeout_s) {
  return {r.exit_code, r.term_signal, r.timed_out, timeout_s};
}

rocprof_run execute(const rocprof_plan& plan, const env_map& base_env) {
  rocprof_run out;
  env_map env = with_overrides(base_env, plan.env_overrides);
  const auto& s = plan.stats;
  remove_expected_outputs(s);
  out.ran.push_back(s.prefix);
  auto r = run_cmd(s.argv, env, plan.cwd, s.timeout_s);
  auto stats_csv = first_existing(s.stats_csv_candidates);
  auto trace_csv = first_existing(s.trace_csv_candidates);
  if (auto err = judge_stats_attempt(exit_of(r, s.timeout_s), stats_csv.has_value(), trace_csv.has_value())) {
    out.error = *err;
    return out;
  }
  // Parse the stats pass before spending the PMC passes on a profile that is already unusable.
  std::vector<kernel_stat> stats;
  std::vector<kernel_dispatch> trace;
  try {
    stats = parse_kernel_stats(read_text_file(*stats_csv));
    trace = parse_kernel_trace(read_text_file(*trace_csv));
    (void)last_dispatch_of(trace, choose_profiled_kernel(stats));
  } catch (const std::exception& e) {
    out.error = e.what();
    return out;
  }
  std::vector<std::string> pmc_texts;
  for (const auto& pass : plan.passes) {
    for (const auto& inv : pass.alternatives) {
      write_file(inv.input_file, inv.input_contents);
      remove_expected_outputs(inv);
      out.ran.push_back(inv.prefix);
      auto pr = run_cmd(inv.argv, env, plan.cwd, inv.timeout_s);
      auto csv = first_existing(inv.counter_csv_candidates);
      std::string text = csv ? read_text_file(*csv) : "";
      bool rows = csv && !parse_csv_table(text).rows.empty();
      auto o = judge_pmc_attempt(inv, exit_of(pr, inv.timeout_s), csv.has_value(), rows);
      if (o.act == pmc_outcome::action::accept) {
        pmc_texts.push_back(text);
        break;
      }
      if (o.act == pmc_outcome::action::try_next) continue;
      if (pass.required) {
        out.error = o.error;
        return out;
      }
      break;
    }
  }
  try {
    out.profile = merge_rocprof(stats, trace, pmc_texts);
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

struct rocm_case {
  scratch_dir dir{"e2e"};
  rocprof_plan plan;
  env_map env;
  // Most cases do not need the wrapper to run (FAKE_ROCPROF_RUN_PROGRAM=0) nor the optional MFMA pass:
  // each skipped child saves an interpreter start.
  rocm_case(const std::string& fixture_name, const std::map<std::string, std::string>& extra = {},
            double budget_s = 600, bool with_mfma = false, bool run_program = false) {
    write_file(dir / "rocprof_wrapper.py", "print('output shape: (2048,)')\n");
    std::map<std::string, std::string> vars{{"FAKE_ROCPROF_FIXTURES", fixture(fixture_name)},
                                            {"FAKE_ROCPROF_LOG", dir / "fake.log"},
                                            {"FAKE_ROCPROF_RUN_PROGRAM", run_program ? "1" : "0"}};
    for (const auto& [k, v] : extra) vars[k] = v;
    env = fake_env(vars);
    std::string bin = find_rocprof_binary({}, env, "python3", {});
    plan = plan_rocprof({"python3", dir / "rocprof_wrapper.py", dir.str(), "w0_r1_sol", bin},
                        {.with_mfma = with_mfma, .total_budget_s = budget_s});
  }
  rocprof_run run() { return execute(plan, env); }
  std::string log() { return read_text_file(dir / "fake.log"); }
};

} // namespace

TEST(FakeRocprof, EndToEndProfileOfTheMeasuredDispatchOnMi300x) {
  rocm_case c("rocm_mi300x_matvec", {}, 600, true, true);
  EXPECT_EQ(c.plan.binary, fakes_dir() + "/rocprofv3");
  auto r = c.run();
  ASSERT_TRUE(r.profile) << r.error;
  const auto& m = r.profile->metrics;
  EXPECT_EQ(r.profile->kernel_name, "matvec_kernel");
  EXPECT_DOUBLE_EQ(m.at("duration_ms"), 1.2);
  EXPECT_DOUBLE_EQ(m.at("sq_insts_valu"), 40'000'000);
  EXPECT_DOUBLE_EQ(m.at("write_size_kb"), 8);
  EXPECT_DOUBLE_EQ(m.at("sq_insts_valu_mfma_mops_bf16"), 0);
  EXPECT_EQ(r.ran.size(), 8u);  // no fallback needed on gfx942
  rocm_roofline_analyzer an({}, find_gpu_specs("AMD Instinct MI300X"));
  auto v = an.analyze(m);
  EXPECT_NEAR(*v.memory_sol_pct, 67.53, 0.01);
  EXPECT_EQ(v.bottleneck, "memory");
  EXPECT_FALSE(v.at_roofline);
  auto log = c.log();
  EXPECT_EQ(log.find("\"-f\""), std::string::npos);
  EXPECT_NE(log.find("\"--output-format\", \"csv\""), std::string::npos);
}

TEST(FakeRocprof, Gfx90aRetriesTheEaCounterAfterANonZeroExitOnEa0) {
  rocm_case c("rocm_gfx90a_matvec", {{"FAKE_ROCPROF_ARCH", "gfx90a"}});
  auto r = c.run();
  ASSERT_TRUE(r.profile) << r.error;
  EXPECT_DOUBLE_EQ(r.profile->metrics.at("tcc_ea_rdreq"), 33'554'432);
  EXPECT_DOUBLE_EQ(r.profile->metrics.at("tcc_ea_wrreq"), 64);
  EXPECT_EQ(r.profile->raw_counters.count("TCC_EA_RDREQ_sum"), 1u);
  EXPECT_EQ(read_text_file(c.dir / "w0_r1_sol_input_pass2_1.txt"), "pmc: TCC_EA_RDREQ_sum\n");
  EXPECT_EQ(read_text_file(c.dir / "w0_r1_sol_input_pass3_1.txt"), "pmc: TCC_EA_WRREQ_sum\n");
  EXPECT_EQ(r.ran.size(), 9u);  // stats + 6 groups + the two EA fallbacks
}

TEST(FakeRocprof, LastAlternativeFailingFailsThePassWithItsNumber) {
  // gfx90a hardware but only EA0 names known: EA0 exits 1, the EA name is unknown (no CSV).
  rocm_case c("rocm_mi300x_matvec", {{"FAKE_ROCPROF_ARCH", "gfx90a"}});
  auto r = c.run();
  EXPECT_FALSE(r.profile);
  EXPECT_EQ(r.error, "rocprof PMC pass 3 failed (rc=0): rocprof completed without a usable CSV");
}

TEST(FakeRocprof, StaleStatsCsvOfAnEarlierKernelIsNeverReused) {
  rocm_case c("rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_STATS", "stale"}});
  write_file(c.plan.stats.stats_csv_candidates[0],
             "\"Name\",\"Calls\",\"TotalDurationNs\",\"AverageNs\"\n\"kernel_a\",1,5000000,5000000\n");
  write_file(c.plan.stats.trace_csv_candidates[0],
             "Kind,Dispatch_Id,Kernel_Name,Start_Timestamp,End_Timestamp\nKERNEL_DISPATCH,1,kernel_a,0,5000000\n");
  auto r = c.run();
  EXPECT_FALSE(r.profile);
  EXPECT_EQ(r.error, "rocprof completed without a usable CSV");
}

TEST(FakeRocprof, StalePmcCsvIsNotCollectedAndTheEaFallbackRuns) {
  rocm_case c("rocm_gfx90a_matvec", {{"FAKE_ROCPROF_ARCH", "any"}, {"FAKE_ROCPROF_FAULT_TCC_EA0_RDREQ_sum", "stale"}});
  const auto& ea0 = c.plan.passes[2].alternatives[0];
  for (const auto& p : ea0.counter_csv_candidates)
    write_file(p, "Dispatch_Id,Kernel_Name,Counter_Name,Counter_Value\n9,matvec_kernel,TCC_EA0_RDREQ_sum,99\n");
  auto r = c.run();
  ASSERT_TRUE(r.profile) << r.error;
  EXPECT_EQ(r.profile->raw_counters.count("TCC_EA0_RDREQ_sum"), 0u);
  EXPECT_DOUBLE_EQ(r.profile->metrics.at("tcc_ea_rdreq"), 33'554'432);
  EXPECT_TRUE(std::filesystem::exists(c.dir / "w0_r1_sol_input_pass2_1.txt"));
}

TEST(FakeRocprof, StatsWithoutAverageNsFailsTheProfile) {
  rocm_case c("rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_STATS", "no_average"}});
  auto r = c.run();
  EXPECT_EQ(r.error, "rocprof stats CSV has no AverageNs");
  EXPECT_EQ(r.ran.size(), 1u);  // no PMC pass reran the kernel for a profile that cannot be used
}

TEST(FakeRocprof, EmptyStatsCsvIsNotAProfile) {
  rocm_case c("rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_STATS", "empty_csv"}});
  EXPECT_EQ(c.run().error, "rocprof completed without a usable CSV");
}

TEST(FakeRocprof, EmptyPmcCsvAndNonZeroExitFailTheirPass) {
  rocm_case empty("rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_FETCH_SIZE", "empty_csv"}});
  EXPECT_EQ(empty.run().error, "rocprof PMC pass 5 failed (rc=0): rocprof PMC CSV has no counter rows");
  rocm_case rc("rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_WRITE_SIZE", "exit_nonzero"}});
  EXPECT_EQ(rc.run().error, "rocprof PMC pass 6 failed (rc=3)");
}

TEST(FakeRocprof, PartialCountersStayAbsent) {
  rocm_case c("rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_SQ_WAVES", "partial"}});
  auto r = c.run();
  ASSERT_TRUE(r.profile) << r.error;
  EXPECT_EQ(r.profile->metrics.count("sq_waves"), 1u);
  EXPECT_EQ(r.profile->metrics.count("sq_insts_valu"), 0u);
  EXPECT_EQ(r.profile->metrics.count("inst_mix_valu_pct"), 0u);
  rocm_roofline_analyzer an({}, find_gpu_specs("AMD Instinct MI300X"));
  EXPECT_FALSE(an.analyze(r.profile->metrics).compute_sol_pct);
}

TEST(FakeRocprof, OptionalMfmaPassMayFailWithoutFailingTheProfile) {
  rocm_case c("rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_SQ_INSTS_VALU_MFMA_MOPS_F16", "exit_nonzero"}}, 600, true);
  auto r = c.run();
  ASSERT_TRUE(r.profile) << r.error;
  EXPECT_EQ(r.profile->metrics.count("sq_insts_valu_mfma_mops_f16"), 0u);
}

TEST(FakeRocprof, DeathBySignalAndHangAndSlowButFinishing) {
  rocm_case sig("rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_STATS", "signal"}});
  EXPECT_EQ(sig.run().error, "rocprof stats pass failed (rc=-11, killed by signal 11)");
  rocm_case hang("rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_STATS", "hang"}}, 10);  // 1 s per command
  EXPECT_EQ(hang.run().error, "rocprof stats pass timed out after 1 s");
  rocm_case slow("rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_STATS", "slow"}, {"FAKE_ROCPROF_SLOW_S", "0.2"}});
  auto r = slow.run();
  EXPECT_TRUE(r.profile) << r.error;
}

TEST(FakeRocprof, FaultsFileInTheFixtureDirectorySelectsAFaultPerPass) {
  scratch_dir fx("fixture-copy");
  for (const char* f : {"kernel_stats.csv", "kernel_trace.csv", "counter_collection.csv"})
    std::filesystem::copy_file(fixture(std::string("rocm_mi300x_matvec/") + f), fx / f);
  write_file(fx / "faults", "# target mode\nFETCH_SIZE exit_nonzero\n");
  rocm_case c("unused", {{"FAKE_ROCPROF_FIXTURES", fx.str()}});
  EXPECT_EQ(c.run().error, "rocprof PMC pass 5 failed (rc=3)");
}

TEST(FakeRocprof, RejectsTheShortFormatFlagAndAMissingSeparatorLikeTheRealTool) {
  auto env = fake_env({{"FAKE_ROCPROF_FIXTURES", fixture("rocm_mi300x_matvec")}});
  scratch_dir d("flags");
  auto r = run_cmd({"rocprofv3", "--kernel-trace", "--stats", "-f", "csv", "-d", d.str(), "-o", "x", "--", "true"}, env);
  EXPECT_EQ(r.exit_code, 2);
  auto r2 = run_cmd({"rocprofv3", "--kernel-trace", "--stats", "--output-format", "csv", "true"}, env);
  EXPECT_EQ(r2.exit_code, 2);
  // The program's own failure is the tool's failure.
  auto r3 = run_cmd({"rocprofv3", "--kernel-trace", "--stats", "--output-format", "csv", "-d", d.str(), "-o", "x",
                     "--", "false"},
                    env);
  EXPECT_EQ(r3.exit_code, 1);
}

TEST(FakeNcu, EndToEndFilteredProfileSelectsTheMeasuredLaunch) {
  scratch_dir d("ncu-e2e");
  write_file(d / "ncu_wrapper.py", "print('ok')\n");
  auto env = fake_env({{"FAKE_NCU_FIXTURES", fixture("ncu_h200_matvec")}});
  auto inv = plan_ncu({"python3", d / "ncu_wrapper.py", d.str(), "w0_r1_sol", find_ncu_binary({}, env, {}),
                       "matvec_kernel", false});
  auto r = run_cmd(inv.argv, with_overrides(env, inv.env_overrides), inv.cwd, inv.timeout_s);
  ASSERT_TRUE(r.ok()) << r.describe() << r.err;
  auto table = load_ncu_csv(inv.log_file, inv.kernel_filter);
  for (const auto& row : table.rows) EXPECT_EQ(row.kernel_name, "matvec_kernel");  // the filter worked
  auto sel = select_ncu_kernel(table, std::string("matvec_kernel"));
  EXPECT_EQ(*sel.id, 4);
  nvidia_roofline_analyzer an({});
  auto v = an.analyze(sel.metrics);
  EXPECT_DOUBLE_EQ(*v.memory_sol_pct, 12.41);
  EXPECT_EQ(v.bottleneck, "underutilized");  // 4 GiB in 7.46 ms: 576 GB/s of 4.8 TB/s
}

TEST(FakeNcu, PermissionErrorAndNoKernelsProfiled) {
  scratch_dir d("ncu-perm");
  auto env = fake_env({{"FAKE_NCU_FIXTURES", fixture("ncu_h200_matvec")}, {"FAKE_NCU_FAULT", "permission"}});
  auto inv = plan_ncu({"python3", "-c", d.str(), "k", "ncu", "", false});
  auto r = run_cmd(inv.argv, env, d.str());
  EXPECT_EQ(r.exit_code, 1);
  auto msg = ncu_failure_message(r.exit_code, r.out + r.err, false);
  EXPECT_NE(msg.find("KAGENT_NCU_USE_SUDO=1"), std::string::npos) << msg;

  auto env2 = fake_env({{"FAKE_NCU_FIXTURES", fixture("ncu_h200_matvec")}});
  write_file(d / "w.py", "pass\n");
  auto wrong = plan_ncu({"python3", d / "w.py", d.str(), "k2", "ncu", "no_such_kernel", false});
  auto r2 = run_cmd(wrong.argv, env2, d.str());
  ASSERT_TRUE(r2.ok()) << r2.err;
  try {
    load_ncu_csv(wrong.log_file, wrong.kernel_filter);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("matched no launch"), std::string::npos) << e.what();
  }
}
