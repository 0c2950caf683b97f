#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "platform/common/errors.hpp"
#include "platform/nvidia/ncu_parse.hpp"
#include "platform/nvidia/ncu_plan.hpp"
#include "platform/profile_core/profile_common.hpp"
#include "test_support.hpp"
#include "platform/common/files.hpp"

using namespace kagent;
using kagent::test::fixture;
using kagent::test::scratch_dir;
using kagent::test::write_file;

namespace {
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }
} // namespace

TEST(NcuPlan, FiltersByKernelNameWithoutLaunchSkipAndUsesAPerKernelLogFile) {
  auto inv = plan_ncu({"python3", "/art/ncu_wrapper.py", "/art", "w1_r2_sol", "/usr/local/cuda/bin/ncu",
                       "matvec_kernel", false, ""});
  const auto& a = inv.argv;
  EXPECT_EQ(a[0], "/usr/local/cuda/bin/ncu");
  auto k = std::find(a.begin(), a.end(), "--kernel-name");
  ASSERT_NE(k, a.end());
  EXPECT_EQ(*(k + 1), "matvec_kernel");
  // A fixed skip counts autotune and at:: launches (SPEC §14 B.86); the parser takes the last dispatch.
  EXPECT_FALSE(has(a, "--launch-skip"));
  EXPECT_FALSE(has(a, "--launch-count"));
  for (const char* f : {"--csv", "raw", "base", "demangled", "kernel"}) EXPECT_TRUE(has(a, f)) << f;
  EXPECT_EQ(inv.log_file, "/art/w1_r2_sol_ncu.csv");
  EXPECT_EQ(inv.expected_outputs, std::vector<std::string>{"/art/w1_r2_sol_ncu.csv"});
  EXPECT_EQ(a[a.size() - 2], "python3");
  EXPECT_EQ(a.back(), "/art/ncu_wrapper.py");
  auto m = std::find(a.begin(), a.end(), "--metrics");
  ASSERT_NE(m, a.end());
  auto list = *(m + 1);
  EXPECT_EQ(std::count(list.begin(), list.end(), ',') + 1, 30);
  EXPECT_NE(list.find("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"), std::string::npos);
  EXPECT_EQ(inv.env_overrides.at("TRITON_CACHE_DIR"), "/art/.triton_cache");
  auto other = plan_ncu({"python3", "/art/ncu_wrapper.py", "/art", "w1_r2_current", "/x/ncu", "", false, ""});
  EXPECT_NE(other.log_file, inv.log_file);  // the SOL profile never overwrites the round profile (B.107)
  EXPECT_FALSE(has(other.argv, "--kernel-name"));
}

TEST(NcuPlan, AStandbyFiltersByTheMeasuredRangeNotByAName) {
  // Started before its kernels exist: no name to filter by; the NVTX range of the measured calls
  // selects exactly those launches, and a name given as well is not used.
  // PyTorch's own kernels in the range (fill, conversion) are left out by a regex, not by a name.
  auto inv = plan_ncu({"python3", "/w.py", "/art", "standby_1", "/bin/ncu", "matvec_kernel", false, "kagent_measured/"});
  const auto& a = inv.argv;
  auto k = std::find(a.begin(), a.end(), "--kernel-name");
  ASSERT_NE(k, a.end());
  EXPECT_EQ(*(k + 1), "regex:^(?!.*at::)");
  EXPECT_FALSE(has(a, "matvec_kernel"));
  EXPECT_TRUE(inv.kernel_filter.empty());
  auto n = std::find(a.begin(), a.end(), "--nvtx-include");
  ASSERT_NE(n, a.end());
  EXPECT_EQ(*(n + 1), "kagent_measured/");
  EXPECT_EQ(*(n - 1), "--nvtx");
  EXPECT_EQ(a[a.size() - 2], "python3");
}

TEST(NcuPlan, SudoPrefixOnlyWhenAsked) {
  auto inv = plan_ncu({"python3", "/w.py", "/art", "k", "/bin/ncu", "", true, ""});
  EXPECT_EQ(inv.argv[0], "sudo");
  EXPECT_EQ(inv.argv[1], "-E");
  EXPECT_EQ(inv.argv[2].rfind("--preserve-env=PATH,LD_LIBRARY_PATH,CUDA_VISIBLE_DEVICES", 0), 0u);
  EXPECT_EQ(inv.argv[3], "/bin/ncu");
  EXPECT_TRUE(ncu_sudo_requested({{"KAGENT_NCU_USE_SUDO", "1"}}));
  EXPECT_FALSE(ncu_sudo_requested({{"KAGENT_NCU_USE_SUDO", "0"}}));
}

TEST(NcuPlan, BinaryLookup) {
  scratch_dir d("ncu");
  write_file(d / "bin/ncu", "#!/bin/sh\n");
  std::filesystem::permissions(d.path / "bin/ncu", std::filesystem::perms::owner_all);
  platform_kwargs kw;
  kw.ncu_bin_path = d / "bin/ncu";
  EXPECT_EQ(find_ncu_binary(kw, {}), d / "bin/ncu");
  EXPECT_EQ(find_ncu_binary({}, {{"PATH", d / "bin"}}), d / "bin/ncu");
  EXPECT_EQ(find_ncu_binary({}, {{"PATH", "/nonexistent"}}, {d / "bin"}), d / "bin/ncu");
  EXPECT_THROW(find_ncu_binary({}, {{"PATH", "/nonexistent"}}, {}), run_error);
  kw.ncu_bin_path = d / "missing/ncu";
  EXPECT_THROW(find_ncu_binary(kw, {}), user_error);
}

TEST(NcuParse, RealShapeSkipsCommentsAndUnitsAndStripsThousandsSeparators) {
  auto t = parse_ncu_csv(read_file(fixture("ncu_h200_matvec/ncu_raw.csv")));
  ASSERT_EQ(t.rows.size(), 6u);
  EXPECT_EQ(t.units.at("dram__bytes_read.sum"), "byte");
  EXPECT_EQ(t.units.at("sm__throughput.avg.pct_of_peak_sustained_elapsed"), "%");
  const auto& r = t.rows[4];
  EXPECT_EQ(r.kernel_name, "matvec_kernel");
  EXPECT_DOUBLE_EQ(r.metrics.at("sm__cycles_active.avg"), 213152);
  EXPECT_DOUBLE_EQ(r.metrics.at("launch__shared_mem_per_block_allocated"), 1024);
  EXPECT_EQ(r.metrics.count("sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_active"), 0u);  // "n/a"
  EXPECT_EQ(r.metrics.count("device__attribute_clock_rate"), 0u);
}

TEST(NcuParse, TheTargetKernelsLastDispatchIsChosenNeverTheLastRowOfTheTable) {
  auto t = parse_ncu_csv(read_file(fixture("ncu_h200_matvec/ncu_raw.csv")));
  ASSERT_NE(t.rows.back().kernel_name.find("at::"), std::string::npos);  // the real output's last row
  auto by_name = select_ncu_kernel(t, std::string("matvec_kernel"));
  EXPECT_EQ(by_name.kernel_name, "matvec_kernel");
  EXPECT_EQ(*by_name.id, 4);
  EXPECT_EQ(by_name.dispatch_count, 4);
  EXPECT_TRUE(by_name.chosen_by_name);
  EXPECT_DOUBLE_EQ(by_name.metrics.at("sm__throughput.avg.pct_of_peak_sustained_elapsed"), 7.52);
  EXPECT_DOUBLE_EQ(by_name.metrics.at("gpu__time_duration.sum"), 7460000);
  // No name known: the busiest kernel without at:: (the at:: reduce is busier), its last dispatch.
  auto busiest = select_ncu_kernel(t);
  EXPECT_EQ(busiest.kernel_name, "matvec_kernel");
  EXPECT_EQ(*busiest.id, 4);
  EXPECT_FALSE(busiest.chosen_by_name);
  EXPECT_EQ(error_of([&] { select_ncu_kernel(t, std::string("nope")); }), "ncu CSV has no dispatch of kernel 'nope'");
}

TEST(NcuParse, HeaderWithoutUnitsRowAndDemangledSignatureMatch) {
  auto t = parse_ncu_csv("\"ID\",\"Kernel Name\",\"sm__throughput.avg.pct_of_peak_sustained_elapsed\"\n"
                         "\"0\",\"add_kernel(float*, int)\",\"12.5\"\n"
                         "\"1\",\"add_kernel(float*, int)\",\"13.5\"\n");
  EXPECT_TRUE(t.units.empty());
  auto s = select_ncu_kernel(t, std::string("add_kernel"));
  EXPECT_EQ(*s.id, 1);
  EXPECT_THROW(parse_ncu_csv("==PROF== nothing\n"), run_error);
  auto at_only = parse_ncu_csv("\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"0\",\"at::x\",\"5\"\n");
  EXPECT_EQ(error_of([&] { select_ncu_kernel(at_only); }), "ncu CSV lists no kernel outside at::");
}

TEST(NcuErrors, PermissionErrorSaysHowToFixIt) {
  auto msg = ncu_failure_message(
      1, "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters",
      false);
  EXPECT_NE(msg.find("ERR_NVGPUCTRPERM"), std::string::npos);
  EXPECT_NE(msg.find("KAGENT_NCU_USE_SUDO=1"), std::string::npos);
  EXPECT_NE(msg.find("NVreg_RestrictProfilingToAdminUsers=0"), std::string::npos);
  auto sudo = ncu_failure_message(1, "requires root", true);
  EXPECT_EQ(sudo.find("KAGENT_NCU_USE_SUDO"), std::string::npos);
  EXPECT_FALSE(ncu_permission_error("segfault", false));
  std::string long_out(800, 'x');
  EXPECT_EQ(ncu_failure_message(3, long_out, false), "ncu failed with return code 3: " + std::string(500, 'x'));
}

TEST(NcuErrors, MissingShortAndEmptyLogFiles) {
  scratch_dir d("ncu-files");
  EXPECT_EQ(error_of([&] { load_ncu_csv(d / "none.csv"); }).rfind("ncu completed without a CSV", 0), 0u);
  write_file(d / "short.csv", "\"ID\"\n");
  EXPECT_EQ(error_of([&] { load_ncu_csv(d / "short.csv"); }).rfind("ncu CSV is likely empty", 0), 0u);
  write_file(d / "none_profiled.csv", "==PROF== Disconnected from process 1\n==WARNING== No kernels were profiled.\n");
  EXPECT_NE(error_of([&] { load_ncu_csv(d / "none_profiled.csv", "matvec_kernel"); }).find("--kernel-name matvec_kernel"),
            std::string::npos);
}

// Captured on the lent H200 (ncu 2025.3.1) with tests/fakes/fixtures/profiling/ncu_h200_real/capture.sh:
// a Triton add kernel after at:: conversions, 3 warm-ups + 1 measured call, then an at:: reduce.
TEST(NcuRealH200, UnfilteredOutputLastRowIsAPyTorchKernelAndTheBusiestRuleFindsTheTritonLaunch) {
  auto t = load_ncu_csv(fixture("ncu_h200_real/all.csv"));
  ASSERT_EQ(t.rows.size(), 9u);
  EXPECT_NE(t.rows.back().kernel_name.find("at::reduce_kernel"), std::string::npos);
  EXPECT_EQ(t.units.at("gpu__time_duration.sum"), "ns");
  auto s = select_ncu_kernel(t);
  EXPECT_EQ(s.kernel_name, "add_kernel");
  EXPECT_EQ(*s.id, 6);
  EXPECT_EQ(s.dispatch_count, 4);
  // ncu 2025.3.1 on Hopper silently leaves out two of the requested metrics: absent, never 0.
  EXPECT_EQ(s.metrics.size(), ncu_metric_list().size() - 2);
  EXPECT_EQ(s.metrics.count("sm__inst_executed_pipe_fp32.avg.pct_of_peak_sustained_active"), 0u);
  EXPECT_EQ(s.metrics.count("smsp__warp_issue_stalled_memory_dependency_per_warp_active.pct"), 0u);
  EXPECT_GT(s.all_metrics.size(), s.metrics.size());
  EXPECT_EQ(s.metrics.count("device__attribute_clock_rate"), 0u);
  EXPECT_EQ(s.metrics.count("nvlink__count_logical"), 0u);
  EXPECT_GT(s.metrics.at("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"), 50.0);
  auto by_name = select_ncu_kernel(t, std::string("add_kernel"));
  EXPECT_EQ(*by_name.id, 6);
}

TEST(NcuRealH200, FilteredOutputHoldsOnlyTheTargetAndItsLastLaunchIsTheMeasuredOne) {
  auto t = load_ncu_csv(fixture("ncu_h200_real/filtered.csv"), "add_kernel");
  ASSERT_EQ(t.rows.size(), 4u);
  for (const auto& r : t.rows) EXPECT_EQ(r.kernel_name, "add_kernel");
  auto s = select_ncu_kernel(t, std::string("add_kernel"));
  EXPECT_EQ(*s.id, 3);
  EXPECT_GT(s.metrics.at("dram__bytes_read.sum"), 60e6);  // 2 x 16M bf16 = 64 MiB, thousands separators parsed
}

// ---- profile batches: one ncu process, rows told apart by the marker before each kernel -------------

TEST(NcuBatch, RowsAfterEachMarkerAreThatKernelsAndTheMeasuredLaunchIsChosenAsAlone) {
  const auto t = parse_ncu_csv(read_file(fixture("ncu_batch_matvec/ncu_raw.csv")));
  const auto parts = split_ncu_batch(t, 2);
  ASSERT_EQ(parts.size(), 2u);
  ASSERT_EQ(parts[0].rows.size(), 4u);
  for (const auto& r : parts[0].rows) EXPECT_EQ(r.kernel_name, "matvec_kernel");
  ASSERT_EQ(parts[1].rows.size(), 4u);  // the split-K kernel's four launches (the filter keeps at:: out)
  EXPECT_EQ(parts[1].columns, t.columns);
  EXPECT_EQ(parts[1].units, t.units);
  auto a = select_ncu_kernel(parts[0], std::string("matvec_kernel"));
  EXPECT_EQ(a.id, 4);
  EXPECT_EQ(a.dispatch_count, 4);
  auto b = select_ncu_kernel(parts[1], std::string("matvec_splitk_kernel"));
  EXPECT_EQ(b.id, 9);
  EXPECT_DOUBLE_EQ(b.metrics.at("gpu__time_duration.sum"), 1004512);
  // Without names, the busiest kernel outside at:: of each part.
  EXPECT_EQ(select_ncu_kernel(parts[1]).kernel_name, "matvec_splitk_kernel");
  // Rows before the first marker (the inputs' creation) belong to no kernel; markers never count.
  for (const auto& p : parts)
    for (const auto& r : p.rows) EXPECT_NE(r.kernel_name, batch_marker_kernel);
}

TEST(NcuBatch, AKernelWhoseMarkerNeverRanHasNoRowsAndStrayMarkersAreIgnored) {
  auto t = parse_ncu_csv(read_file(fixture("ncu_batch_matvec/ncu_raw.csv")));
  // The batch died after the first kernel: nothing from the second marker on.
  auto died = t;
  died.rows.erase(std::remove_if(died.rows.begin(), died.rows.end(), [](const ncu_row& r) { return r.id.value_or(0) >= 5; }),
                  died.rows.end());
  auto parts = split_ncu_batch(died, 2);
  EXPECT_EQ(parts[0].rows.size(), 4u);
  EXPECT_TRUE(parts[1].rows.empty());
  // A marker of another grid (not this batch's index) attributes nothing; rows come in ID order.
  auto odd = t;
  for (auto& r : odd.rows)
    if (r.kernel_name == batch_marker_kernel && r.grid_size == "(2, 1, 1)") r.grid_size = "(9, 1, 1)";
  std::reverse(odd.rows.begin(), odd.rows.end());
  parts = split_ncu_batch(odd, 2);
  EXPECT_EQ(parts[0].rows.size(), 4u);
  EXPECT_TRUE(parts[1].rows.empty());
  EXPECT_EQ(split_ncu_batch(t, 3)[2].rows.size(), 0u);
}

TEST(NcuStandby, EachKernelsRowsAreTheLaunchesInsideItsNvtxRangeOnRealOutput) {
  // Real H100 output of a standby batch (no name filter, no marker): k0's measured call launched one
  // kernel, k1's three (PyTorch's zero fill, the split-K kernel, PyTorch's copy).
  const auto t = parse_ncu_csv(read_file(fixture("ncu_standby_matvec/ncu_raw.csv")));
  ASSERT_EQ(t.rows.size(), 4u);
  EXPECT_EQ(nvtx_kernel_range(t.rows[0].nvtx).value_or(""), "k0");
  const auto parts = split_ncu_by_range(t, {"k0", "k1"});
  ASSERT_EQ(parts.size(), 2u);
  ASSERT_EQ(parts[0].rows.size(), 1u);
  EXPECT_EQ(parts[0].rows[0].kernel_name, "matvec_kernel");
  ASSERT_EQ(parts[1].rows.size(), 3u);
  EXPECT_EQ(parts[1].columns, t.columns);
  auto a = select_ncu_kernel(parts[0], std::string("matvec_kernel"));
  EXPECT_EQ(a.id, 0);
  EXPECT_DOUBLE_EQ(a.metrics.at("gpu__time_duration.sum"), 2389024);
  auto b = select_ncu_kernel(parts[1], std::string("matvec_splitk_kernel"));
  EXPECT_EQ(b.id, 2);
  EXPECT_DOUBLE_EQ(b.metrics.at("gpu__time_duration.sum"), 1410112);
  // Unnamed: the busiest kernel outside at:: of its range, never PyTorch's fill or copy.
  EXPECT_EQ(select_ncu_kernel(parts[1]).kernel_name, "matvec_splitk_kernel");
  // Ids in another order, an id the batch never ran, rows outside any kernel range.
  const auto swapped = split_ncu_by_range(t, {"k1", "k0", "k7"});
  EXPECT_EQ(swapped[0].rows.size(), 3u);
  EXPECT_EQ(swapped[1].rows.size(), 1u);
  EXPECT_TRUE(swapped[2].rows.empty());
  auto stray = t;
  stray.rows[0].nvtx = "\"<default domain>:kagent_measured:none:none:none:none:none:none\"";
  EXPECT_TRUE(split_ncu_by_range(stray, {"k0", "k1"})[0].rows.empty());
}

TEST(NcuStandby, TheKernelRangeIsReadFromTheNvtxCell) {
  EXPECT_EQ(nvtx_kernel_range("\"<default domain>:kagent_measured:none\"  \"<default domain>:kagent_kernel:k12:none:none\"")
                .value_or(""),
            "k12");
  EXPECT_EQ(nvtx_kernel_range("<default domain>:kagent_kernel:k3").value_or(""), "k3");
  EXPECT_FALSE(nvtx_kernel_range("").has_value());
  EXPECT_FALSE(nvtx_kernel_range("\"<default domain>:kagent_kernel::none\"").has_value());
  // Rows of output without --nvtx carry no range.
  const auto plain = parse_ncu_csv(read_file(fixture("ncu_batch_matvec/ncu_raw.csv")));
  for (const auto& r : plain.rows) EXPECT_TRUE(r.nvtx.empty());
}

TEST(NcuBatch, TheFilterNamesTheMarkerAndEachKernelOnceEscaped) {
  EXPECT_EQ(ncu_batch_filter({"matvec_kernel", "matvec_splitk_kernel", "matvec_kernel"}),
            "regex:^(kagent_batch_marker|matvec_kernel|matvec_splitk_kernel)$");
  EXPECT_EQ(ncu_batch_filter({"a.b", "c$"}), "regex:^(kagent_batch_marker|a\\.b|c\\$)$");
  EXPECT_EQ(ncu_batch_filter({"matvec_kernel", ""}), "") << "an unknown name: no filter at all";
  EXPECT_EQ(ncu_batch_filter({}), "");
}
