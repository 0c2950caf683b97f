#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "platform/common/errors.hpp"
#include "platform/rocm/rocprof_plan.hpp"
#include "test_support.hpp"

using namespace kagent;
using kagent::test::scratch_dir;
using kagent::test::write_file;

namespace {

rocprof_target target(const std::string& dir, const std::string& id = "w0_r1_sol") {
  return {"/venv/bin/python", dir + "/rocprof_wrapper.py", dir, id, "/opt/rocm/bin/rocprofv3"};
}

std::vector<std::string> after_separator(const std::vector<std::string>& argv) {
  auto it = std::find(argv.begin(), argv.end(), "--");
  return it == argv.end() ? std::vector<std::string>{} : std::vector<std::string>(it + 1, argv.end());
}

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

void make_exec(const std::string& path) {
  write_file(path, "#!/bin/sh\nexit 0\n");
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
}

} // namespace

TEST(RocprofPlan, StatsPassUsesKernelTraceStatsLongCsvFormatAndSeparatesTheProgram) {
  auto p = plan_rocprof(target("/art"));
  const auto& a = p.stats.argv;
  EXPECT_EQ(a[0], "/opt/rocm/bin/rocprofv3");
  EXPECT_TRUE(has(a, "--kernel-trace"));
  EXPECT_TRUE(has(a, "--stats"));
  auto fmt = std::find(a.begin(), a.end(), "--output-format");
  ASSERT_NE(fmt, a.end());
  EXPECT_EQ(*(fmt + 1), "csv");
  EXPECT_FALSE(has(a, "-f"));  // ROCm 7.0's rocprofv3 rejects -f (SPEC §14 A.2)
  EXPECT_EQ(after_separator(a), (std::vector<std::string>{"/venv/bin/python", "/art/rocprof_wrapper.py"}));
  EXPECT_EQ(p.cwd, "/art");
  EXPECT_EQ(p.env_overrides.at("TRITON_CACHE_DIR"), "/art/.triton_cache");
}

TEST(RocprofPlan, EveryCounterGroupIsItsOwnInputFilePassAndFetchNeverSharesWithWrite) {
  auto p = plan_rocprof(target("/art"));
  ASSERT_EQ(p.passes.size(), 7u);  // the six of SPEC §5.3 plus the optional MFMA group
  std::set<std::string> inputs;
  for (const auto& pass : p.passes)
    for (const auto& inv : pass.alternatives) {
      EXPECT_TRUE(inputs.insert(inv.input_file).second) << "input file reused: " << inv.input_file;
      auto i = std::find(inv.argv.begin(), inv.argv.end(), "-i");
      ASSERT_NE(i, inv.argv.end());
      EXPECT_EQ(*(i + 1), inv.input_file);
      EXPECT_TRUE(has(inv.argv, "--output-format"));
      EXPECT_EQ(after_separator(inv.argv).size(), 2u);
      EXPECT_EQ(inv.input_contents.rfind("pmc: ", 0), 0u);
      bool fetch = has(inv.counters, "FETCH_SIZE"), write = has(inv.counters, "WRITE_SIZE");
      EXPECT_FALSE(fetch && write) << "FETCH_SIZE and WRITE_SIZE in one pass (error 38 and a hang on gfx942)";
    }
  EXPECT_EQ(p.passes[0].alternatives[0].input_contents,
            "pmc: SQ_WAVES SQ_INSTS_VALU SQ_INSTS_SALU SQ_INSTS_VMEM_RD SQ_INSTS_VMEM_WR SQ_INSTS_LDS SQ_WAIT_INST_ANY\n");
  EXPECT_EQ(p.passes[4].alternatives[0].counters, std::vector<std::string>{"FETCH_SIZE"});
  EXPECT_EQ(p.passes[5].alternatives[0].counters, std::vector<std::string>{"WRITE_SIZE"});
  EXPECT_TRUE(p.passes[5].required);
  EXPECT_FALSE(p.passes[6].required);  // MFMA counters are a bonus, not a reason to fail a profile
  EXPECT_EQ(plan_rocprof(target("/art"), {.with_mfma = false}).passes.size(), 6u);
}

TEST(RocprofPlan, Ea0NamesComeFirstWithTheUnprefixedEaNameAsTheSamePassAlternative) {
  auto p = plan_rocprof(target("/art"));
  for (int i : {2, 3}) {
    const auto& alts = p.passes[static_cast<size_t>(i)].alternatives;
    ASSERT_EQ(alts.size(), 2u);
    EXPECT_EQ(alts[0].counters[0].rfind("TCC_EA0_", 0), 0u);
    EXPECT_EQ(alts[1].counters[0].rfind("TCC_EA_", 0), 0u);
    EXPECT_FALSE(alts[0].last_alternative);
    EXPECT_TRUE(alts[1].last_alternative);
    EXPECT_EQ(alts[0].pass, alts[1].pass);
  }
  EXPECT_EQ(p.passes[2].alternatives[1].input_file, "/art/w0_r1_sol_input_pass2_1.txt");
  EXPECT_EQ(p.passes[2].alternatives[1].input_contents, "pmc: TCC_EA_RDREQ_sum\n");
  EXPECT_EQ(p.passes[2].alternatives[0].log_line, "[rocprof] Running PMC pass 3: TCC_EA0_RDREQ_sum");
}

TEST(RocprofPlan, PrefixesAndExpectedOutputsAreUniquePerKernelAndInvocation) {
  auto a = plan_rocprof(target("/art", "w0_r1_sol"));
  auto b = plan_rocprof(target("/art", "w0_r1_current"));  // same round, same artifacts dir
  std::set<std::string> seen;
  for (const auto* plan : {&a, &b})
    for (const auto* inv : plan->all_invocations()) {
      EXPECT_TRUE(seen.insert(inv->prefix).second) << inv->prefix;
      for (const auto& f : inv->expected_outputs) EXPECT_TRUE(seen.insert(f).second) << f;
    }
  EXPECT_TRUE(has(a.stats.expected_outputs, "/art/w0_r1_sol_stats_kernel_stats.csv"));
  EXPECT_TRUE(has(a.stats.expected_outputs, "/art/w0_r1_sol_stats_kernel_trace.csv"));
  const auto& pmc = a.passes[4].alternatives[0];
  EXPECT_TRUE(has(pmc.expected_outputs, "/art/pmc_1/w0_r1_sol_pass4_0_counter_collection.csv"));
  EXPECT_TRUE(has(pmc.expected_outputs, "/art/w0_r1_sol_pass4_0_counter_collection.csv"));
  EXPECT_EQ(sanitize_kernel_id("round 1/../x"), "round_1_.._x");
}

TEST(RocprofPlan, StaleCsvFromAnEarlierKernelIsDeletedBeforeTheInvocationAndNeverAccepted) {
  scratch_dir d("stale");
  auto p = plan_rocprof(target(d.str(), "k"));
  const auto& inv = p.passes[2].alternatives[0];
  write_file(inv.counter_csv_candidates[0], "Counter_Name,Counter_Value\nTCC_EA0_RDREQ_sum,99\n");
  write_file(p.stats.stats_csv_candidates[0], "\"Name\",\"AverageNs\"\n\"kernel_a\",5000000\n");
  ASSERT_TRUE(first_existing(inv.counter_csv_candidates));
  auto removed = remove_expected_outputs(inv);
  EXPECT_EQ(removed.size(), 1u);
  EXPECT_FALSE(first_existing(inv.counter_csv_candidates));
  remove_expected_outputs(p.stats);
  EXPECT_FALSE(first_existing(p.stats.stats_csv_candidates));
  // A run that then exits 0 without writing is not collected, and the EA fallback is tried.
  auto o = judge_pmc_attempt(inv, {}, false, false);
  EXPECT_EQ(o.act, pmc_outcome::action::try_next);
  EXPECT_EQ(judge_stats_attempt({}, false, false).value_or(""), "rocprof completed without a usable CSV");
}

TEST(RocprofPlan, NonZeroExitOnEa0TriesTheEaAlternativeAndOnlyTheLastAlternativeFailsThePass) {
  auto p = plan_rocprof(target("/art"));
  const auto& ea0 = p.passes[2].alternatives[0];
  const auto& ea = p.passes[2].alternatives[1];
  EXPECT_EQ(judge_pmc_attempt(ea0, {1, 0, false, 0}, false, false).act, pmc_outcome::action::try_next);
  auto last = judge_pmc_attempt(ea, {1, 0, false, 0}, false, false);
  EXPECT_EQ(last.act, pmc_outcome::action::fail_pass);
  EXPECT_EQ(last.error, "rocprof PMC pass 3 failed (rc=1)");
  EXPECT_EQ(judge_pmc_attempt(ea0, {0, 0, false, 0}, true, true).act, pmc_outcome::action::accept);
  auto no_rows = judge_pmc_attempt(p.passes[4].alternatives[0], {0, 0, false, 0}, true, false);
  EXPECT_EQ(no_rows.act, pmc_outcome::action::fail_pass);
  EXPECT_NE(no_rows.error.find("rocprof PMC CSV has no counter rows"), std::string::npos);
  EXPECT_NE(no_rows.error.find("rocprof PMC pass 5 failed (rc=0)"), std::string::npos);
  auto sig = judge_pmc_attempt(ea, {0, 11, false, 0}, false, false);
  EXPECT_EQ(sig.error, "rocprof PMC pass 3 failed (rc=-11, killed by signal 11)");
  auto hang = judge_pmc_attempt(ea0, {0, 0, true, 150}, false, false);
  EXPECT_EQ(hang.act, pmc_outcome::action::fail_pass);  // the budget is spent: no fallback after a hang
  EXPECT_EQ(hang.error, "rocprof PMC pass 3 timed out after 150 s");
  EXPECT_EQ(judge_stats_attempt({2, 0, false, 0}, true, true).value_or(""), "rocprof stats pass failed (rc=2)");
  EXPECT_FALSE(judge_stats_attempt({0, 0, false, 0}, true, true));
}

TEST(RocprofPlan, TimeoutsFromOneBudgetFitTheWorstCaseInsideIt) {
  auto p = plan_rocprof(target("/art"));
  double share = apply_profile_budget(p, 900);
  auto all = p.all_invocations();
  EXPECT_EQ(all.size(), 10u);  // stats + 7 passes + 2 EA fallbacks
  double sum = 0;
  for (const auto* inv : all) {
    EXPECT_DOUBLE_EQ(inv->timeout_s, share);
    sum += inv->timeout_s + 1.0;  // plus the kill grace reserved per command
  }
  EXPECT_LE(sum, 900.0);
  EXPECT_GT(share, 80.0);
  EXPECT_DOUBLE_EQ(apply_profile_budget(p, 100000), 600.0);  // never more than the per-command cap
  EXPECT_DOUBLE_EQ(default_profile_budget_s(1800), 900.0);   // fits inside the 1800 s candidate kill
}

TEST(RocprofPlan, EmptyFieldsAreRejected) {
  auto t = target("/art");
  t.binary = "";
  EXPECT_THROW(plan_rocprof(t), user_error);
}

TEST(RocprofBinary, ConfiguredPathsWinAndNcuBinPathIsAcceptedAsTheRocprofBinary) {
  scratch_dir d("bin");
  make_exec(d / "custom/rocprofv3");
  platform_kwargs kw;
  kw.rocprof_bin_path = d / "custom/rocprofv3";
  EXPECT_EQ(find_rocprof_binary(kw, {}, ""), d / "custom/rocprofv3");
  platform_kwargs via_ncu;
  via_ncu.ncu_bin_path = d / "custom/rocprofv3";
  EXPECT_EQ(find_rocprof_binary(via_ncu, {}, ""), d / "custom/rocprofv3");
  platform_kwargs missing;
  missing.rocprof_bin_path = d / "nope/rocprofv3";
  EXPECT_THROW(find_rocprof_binary(missing, {}, ""), user_error);
}

TEST(RocprofBinary, NeverRocprofV1OrV2) {
  scratch_dir d("v1");
  make_exec(d / "rocprof");
  make_exec(d / "rocprofv2");
  for (const char* name : {"rocprof", "rocprofv2"}) {
    platform_kwargs kw;
    kw.rocprof_bin_path = d / name;
    EXPECT_THROW(find_rocprof_binary(kw, {}, ""), user_error) << name;
  }
  // On PATH only v1 and v2 exist: that is "not found", never a fallback.
  env_map env{{"PATH", d.str()}};
  EXPECT_THROW(find_rocprof_binary({}, env, "", {}), run_error);
  auto plan = plan_rocprof(target("/art"));
  for (const auto* inv : plan.all_invocations()) {
    auto base = std::filesystem::path(inv->argv[0]).filename().string();
    EXPECT_EQ(base, "rocprofv3");
  }
}

TEST(RocprofBinary, SearchOrderIsPathThenBesideTheUnresolvedThenTheResolvedInterpreterThenFallbackDirs) {
  scratch_dir d("order");
  // venv/bin/python -> real/bin/python3 (symlink), rocprofv3 beside both, and in a fallback dir.
  make_exec(d / "real/bin/python3");
  std::filesystem::create_directories(d.path / "venv/bin");
  std::filesystem::create_symlink(d.path / "real/bin/python3", d.path / "venv/bin/python");
  make_exec(d / "real/bin/rocprofv3");
  make_exec(d / "opt/bin/rocprofv3");
  make_exec(d / "path/rocprofv3");
  const std::string py = d / "venv/bin/python";
  EXPECT_EQ(find_rocprof_binary({}, {{"PATH", d / "path"}}, py, {d / "opt/bin"}), d / "path/rocprofv3");
  EXPECT_EQ(find_rocprof_binary({}, {{"PATH", "/nonexistent"}}, py, {d / "opt/bin"}), d / "real/bin/rocprofv3");
  make_exec(d / "venv/bin/rocprofv3");
  EXPECT_EQ(find_rocprof_binary({}, {{"PATH", "/nonexistent"}}, py, {d / "opt/bin"}), d / "venv/bin/rocprofv3");
  std::filesystem::remove(d.path / "venv/bin/rocprofv3");
  std::filesystem::remove(d.path / "real/bin/rocprofv3");
  EXPECT_EQ(find_rocprof_binary({}, {{"PATH", "/nonexistent"}}, py, {d / "opt/bin"}), d / "opt/bin/rocprofv3");
  // A bare interpreter name is looked up on PATH before its directory is searched.
  make_exec(d / "real/bin/rocprofv3");
  EXPECT_EQ(find_rocprof_binary({}, {{"PATH", d / "venv/bin"}}, "python", {}), d / "real/bin/rocprofv3");
  EXPECT_THROW(find_rocprof_binary({}, {{"PATH", "/nonexistent"}}, "python", {}), run_error);
}
