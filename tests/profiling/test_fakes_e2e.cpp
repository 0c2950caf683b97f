// End to end against tests/fakes/rocprofv3 and tests/fakes/ncu through the profile runner
// (platform/profiling): plan -> run every invocation (delete expected outputs, write the input file,
// run under its budgeted timeout, judge, fall back) -> parse -> roofline. Also exercises every fault
// mode the fakes offer. The first case runs the real profile wrapper on the matvec example (CPU).
#include <gtest/gtest.h>

#include <regex>

#include <filesystem>
#include <fstream>

#include "platform/gpu/specs.hpp"
#include "platform/nvidia/ncu_parse.hpp"
#include "platform/nvidia/ncu_plan.hpp"
#include "platform/nvidia/nvidia_roofline.hpp"
#include "platform/profile_core/profile_common.hpp"
#include "platform/rocm/rocm_roofline.hpp"
#include "platform/rocm/rocprof_parse.hpp"
#include "platform/rocm/rocprof_plan.hpp"
#include "runner_support.hpp"

using namespace kagent;
using namespace kagent::test;

namespace {

struct rocm_case : runner_case {
  // Most cases do not need the wrapper to run nor the optional MFMA pass: each skipped child saves an
  // interpreter start.
  rocm_case(const std::string& fixture_name, const std::map<std::string, std::string>& extra = {},
            double budget_s = 600, bool with_mfma = false, bool run_program = false)
      : runner_case("rocm", fixture_name, extra, budget_s) {
    req.with_mfma = with_mfma;
    if (run_program) {
      req.env["FAKE_ROCPROF_RUN_PROGRAM"] = "1";
      req.python = harness_python();
    }
  }
  std::string log_text() { return read_file(root / "fake.log"); }
};

double metric(const kernel_profile_outcome& o, const std::string& k) { return o.metrics.at(k); }

} // namespace

TEST(FakeRocprof, EndToEndProfileOfTheMeasuredDispatchOnMi300x) {
  if (!harness_python_usable()) GTEST_SKIP() << harness_python() << " cannot import torch and triton";
  rocm_case c("rocm_mi300x_matvec", {}, 600, true, true);
  auto r = c.run();
  ASSERT_TRUE(r.ok) << r.error << "\n" << r.output_tail;
  ASSERT_FALSE(r.records.empty());
  EXPECT_EQ(r.records[0].argv[0], fakes_dir() + "/rocprofv3");
  EXPECT_EQ(r.kernel_name, "matvec_kernel");
  EXPECT_DOUBLE_EQ(metric(r, "duration_ms"), 1.2);
  EXPECT_DOUBLE_EQ(metric(r, "sq_insts_valu"), 40'000'000);
  EXPECT_DOUBLE_EQ(metric(r, "write_size_kb"), 8);
  EXPECT_DOUBLE_EQ(metric(r, "sq_insts_valu_mfma_mops_bf16"), 0);
  EXPECT_EQ(r.records.size(), 8u);  // no fallback needed on gfx942
  // Every invocation really ran the wrapper on the kernel: 3 warm-ups, the measured call, its shape.
  for (const auto& rec : r.records) EXPECT_NE(rec.output_tail.find("output shape: (64, 1)"), std::string::npos);
  EXPECT_NEAR(r.roofline->memory_sol_pct.value(), 67.53, 0.01);
  EXPECT_EQ(r.roofline->bottleneck, "memory");
  EXPECT_FALSE(r.roofline->at_roofline);
  auto log = c.log_text();
  EXPECT_EQ(log.find("\"-f\""), std::string::npos);
  EXPECT_NE(log.find("\"--output-format\", \"csv\""), std::string::npos);
}

TEST(FakeRocprof, AProgramThatHangsIsKilledWithTheToolAndItsTempFilesStayInTheProfile) {
  if (!harness_python_usable()) GTEST_SKIP() << harness_python() << " cannot import torch and triton";
  // The tool is fine; the profiled program hangs (in the kernel's import). The kill must reach the
  // grandchild too. A 34 s budget gives the stats pass, the first of 7 commands, about 19 s
  // (fair_command_timeout: 33.5 s less half an even split for each of the 6 passes after it): room
  // for the interpreter to start (importing torch alone took more than 9 s on the 2-core CI machine).
  rocm_case c("rocm_mi300x_matvec", {}, 34, false, true);
  c.req.code = "import os, tempfile, time\n"
               "with open(os.path.join(tempfile.gettempdir(), 'kernel.pid'), 'w') as f:\n"
               "    f.write(str(os.getpid()))\n"
               "time.sleep(3600)\n";
  auto r = c.run();
  EXPECT_FALSE(r.ok);
  static const std::regex timed_out(R"(^rocprof stats pass timed out after [0-9.]+ s$)");
  EXPECT_TRUE(std::regex_match(r.error, timed_out)) << r.error;
  ASSERT_FALSE(r.records.empty());
  EXPECT_GT(r.records[0].timeout_s, 15.0);
  // The program's temp dir is the profile's own.
  const std::string pid_file = c.dir("tmp/kernel.pid");
  ASSERT_TRUE(std::filesystem::exists(pid_file)) << r.output_tail;
  int pid = std::stoi(read_file(pid_file));
  EXPECT_FALSE(process_alive(pid)) << "the profiled program (pid " << pid << ") survived the timeout";
  for (const auto& line : c.log()) EXPECT_FALSE(process_alive(line.at("pid").get<int>()));
}

TEST(FakeRocprof, Gfx90aRetriesTheEaCounterAfterANonZeroExitOnEa0) {
  rocm_case c("rocm_gfx90a_matvec", {{"FAKE_ROCPROF_ARCH", "gfx90a"}});
  auto r = c.run();
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_DOUBLE_EQ(metric(r, "tcc_ea_rdreq"), 33'554'432);
  EXPECT_DOUBLE_EQ(metric(r, "tcc_ea_wrreq"), 64);
  EXPECT_EQ(r.detail.at("_raw_counters").count("TCC_EA_RDREQ_sum"), 1u);
  EXPECT_EQ(read_file(c.dir("w0_r1_sol_input_pass2_1.txt")), "pmc: TCC_EA_RDREQ_sum\n");
  EXPECT_EQ(read_file(c.dir("w0_r1_sol_input_pass3_1.txt")), "pmc: TCC_EA_WRREQ_sum\n");
  EXPECT_EQ(r.records.size(), 9u);  // stats + 6 groups + the two EA fallbacks
}

TEST(FakeRocprof, LastAlternativeFailingFailsThePassWithItsNumber) {
  // gfx90a hardware but only EA0 names known: EA0 exits 1, the EA name is unknown (no CSV).
  rocm_case c("rocm_mi300x_matvec", {{"FAKE_ROCPROF_ARCH", "gfx90a"}});
  auto r = c.run();
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "rocprof PMC pass 3 failed (rc=0): rocprof completed without a usable CSV");
  EXPECT_EQ(r.invocation, "PMC pass 3 (alt 2)");
}

TEST(FakeRocprof, StaleStatsCsvOfAnEarlierKernelIsNeverReused) {
  rocm_case c("rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_STATS", "stale"}});
  write_file(c.dir("w0_r1_sol_stats_kernel_stats.csv"),
             "\"Name\",\"Calls\",\"TotalDurationNs\",\"AverageNs\"\n\"kernel_a\",1,5000000,5000000\n");
  write_file(c.dir("w0_r1_sol_stats_kernel_trace.csv"),
             "Kind,Dispatch_Id,Kernel_Name,Start_Timestamp,End_Timestamp\nKERNEL_DISPATCH,1,kernel_a,0,5000000\n");
  auto r = c.run();
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "rocprof completed without a usable CSV");
}

TEST(FakeRocprof, StalePmcCsvIsNotCollectedAndTheEaFallbackRuns) {
  rocm_case c("rocm_gfx90a_matvec", {{"FAKE_ROCPROF_ARCH", "any"}, {"FAKE_ROCPROF_FAULT_TCC_EA0_RDREQ_sum", "stale"}});
  for (const char* p : {"pmc_1/w0_r1_sol_pass2_0_counter_collection.csv", "w0_r1_sol_pass2_0_counter_collection.csv"})
    write_file(c.dir(p), "Dispatch_Id,Kernel_Name,Counter_Name,Counter_Value\n9,matvec_kernel,TCC_EA0_RDREQ_sum,99\n");
  auto r = c.run();
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.detail.at("_raw_counters").count("TCC_EA0_RDREQ_sum"), 0u);
  EXPECT_DOUBLE_EQ(metric(r, "tcc_ea_rdreq"), 33'554'432);
  EXPECT_TRUE(std::filesystem::exists(c.dir("w0_r1_sol_input_pass2_1.txt")));
}

TEST(FakeRocprof, StatsWithoutAverageNsFailsTheProfile) {
  rocm_case c("rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_STATS", "no_average"}});
  auto r = c.run();
  EXPECT_EQ(r.error, "rocprof stats CSV has no AverageNs");
  EXPECT_EQ(r.records.size(), 1u);  // no PMC pass reran the kernel for a profile that cannot be used
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
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.metrics.count("sq_waves"), 1u);
  EXPECT_EQ(r.metrics.count("sq_insts_valu"), 0u);
  EXPECT_EQ(r.metrics.count("inst_mix_valu_pct"), 0u);
  EXPECT_FALSE(r.roofline->compute_sol_pct.has_value());
}

TEST(FakeRocprof, OptionalMfmaPassMayFailWithoutFailingTheProfile) {
  rocm_case c("rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_SQ_INSTS_VALU_MFMA_MOPS_F16", "exit_nonzero"}}, 600, true);
  auto r = c.run();
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.metrics.count("sq_insts_valu_mfma_mops_f16"), 0u);
  EXPECT_EQ(r.records.back().name, "PMC pass 7");
  EXPECT_EQ(r.records.back().verdict.rfind("optional pass failed: rocprof PMC pass 7 failed (rc=3)", 0), 0u)
      << r.records.back().verdict;
}

TEST(FakeRocprof, DeathBySignalAndHangAndSlowButFinishing) {
  rocm_case sig("rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_STATS", "signal"}});
  EXPECT_EQ(sig.run().error, "rocprof stats pass failed (rc=-11, killed by signal 11)");
  rocm_case hang("rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_STATS", "hang"}}, 10);
  static const std::regex timed_out(R"(^rocprof stats pass timed out after [0-9.]+ s$)");
  const auto h = hang.run();
  EXPECT_TRUE(std::regex_match(h.error, timed_out)) << h.error;
  rocm_case slow("rocm_mi300x_matvec", {{"FAKE_ROCPROF_FAULT_STATS", "slow"}, {"FAKE_ROCPROF_SLOW_S", "0.2"}});
  auto r = slow.run();
  EXPECT_TRUE(r.ok) << r.error;
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
  runner_case c("nvidia", "ncu_h200_matvec");
  auto r = c.run();
  ASSERT_TRUE(r.ok) << r.error << "\n" << r.output_tail;
  ASSERT_EQ(r.records.size(), 1u);
  const auto& argv = r.records[0].argv;
  auto k = std::find(argv.begin(), argv.end(), "--kernel-name");
  ASSERT_NE(k, argv.end());
  EXPECT_EQ(*(k + 1), "matvec_kernel");  // derived from the code's launched @triton.jit function
  auto table = load_ncu_csv(c.dir("w0_r1_sol_ncu.csv"), "matvec_kernel");
  for (const auto& row : table.rows) EXPECT_EQ(row.kernel_name, "matvec_kernel");  // the filter worked
  EXPECT_EQ(r.kernel_name, "matvec_kernel");
  EXPECT_EQ(r.detail.at("id").get<long long>(), 4);
  EXPECT_DOUBLE_EQ(r.roofline->memory_sol_pct.value(), 12.41);
  EXPECT_EQ(r.roofline->bottleneck, "underutilized");  // 4 GiB in 7.46 ms: 576 GB/s of 4.8 TB/s
}

TEST(FakeNcu, PermissionErrorAndNoKernelsProfiled) {
  runner_case perm("nvidia", "ncu_h200_matvec", {{"FAKE_NCU_FAULT", "permission"}});
  auto r = perm.run();
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("KAGENT_NCU_USE_SUDO=1"), std::string::npos) << r.error;
  EXPECT_EQ(r.invocation, "ncu");

  runner_case wrong("nvidia", "ncu_h200_matvec");
  wrong.req.kernel_name = "no_such_kernel";
  auto r2 = wrong.run();
  EXPECT_FALSE(r2.ok);
  EXPECT_NE(r2.error.find("matched no launch"), std::string::npos) << r2.error;
}

TEST(FakeNcu, ABatchRunsTheRealWrapperOnceForBothKernels) {
  if (!harness_python_usable()) GTEST_SKIP() << harness_python() << " cannot import torch and triton";
  // The fake ncu runs the program: the batch launcher runs profile_wrapper.py --batch on the CPU
  // (Triton's interpreter) with both kernels and their markers, in one interpreter.
  runner_case a("nvidia", "ncu_batch_matvec", {{"FAKE_NCU_RUN_PROGRAM", "1"}});
  a.req.python = harness_python();
  a.req.kernel_id = "parent_r1_c0";
  a.req.dir = a.root / "r1_c0/profile_parent_r1_c0";
  auto b = a.req;
  b.kernel_id = "parent_r1_c1";
  b.dir = a.root / "r1_c1/profile_parent_r1_c1";
  b.code = read_file(std::string(KAGENT_SOURCE_DIR) + "/tests/cheats/matvec/honest_control.py");
  b.kernel_name = "matvec_splitk_kernel";  // the fixture's second kernel: the rows are the fixture's
  auto out = profile_kernels({a.req, b});
  ASSERT_TRUE(out[0].ok) << out[0].error << "\n" << out[0].output_tail;
  ASSERT_TRUE(out[1].ok) << out[1].error << "\n" << out[1].output_tail;
  ASSERT_EQ(log_lines(a.root / "fake.log").size(), 1u);
  const auto& tail = out[0].records.at(0).output_tail;
  EXPECT_NE(tail.find("kernel k0 output shape: (64, 1)"), std::string::npos) << tail;
  EXPECT_NE(tail.find("kernel k1 output shape: (64, 1)"), std::string::npos) << tail;
  EXPECT_NE(tail.find("batch: 2 of 2 kernel(s) ran"), std::string::npos) << tail;
}
