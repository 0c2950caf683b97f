// `kagent-actors inspect-profile` through the real binary, on the committed fixtures.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "test_support.hpp"

using namespace kagent;
using namespace kagent::test;

namespace {

std::string binary() { return std::string(KAGENT_BINARY_DIR) + "/app/kagent-actors"; }

process_result cli(std::vector<std::string> args) {
  if (!std::filesystem::exists(binary())) ADD_FAILURE() << "kagent-actors is not built: " << binary();
  args.insert(args.begin(), {binary(), "inspect-profile"});
  return run_cmd(args, current_environment());
}

std::vector<std::string> rocm_args(const std::string& dir) {
  return {"rocm", "--stats", fixture(dir + "/kernel_stats.csv"), "--trace", fixture(dir + "/kernel_trace.csv"),
          "--pmc", fixture(dir + "/counter_collection.csv"), "--gpu-name", "AMD Instinct MI300X"};
}

} // namespace

TEST(InspectProfile, RocmPrintsTheChosenKernelDispatchMetricsAndVerdict) {
  auto r = cli(rocm_args("rocm_mi300x_matvec"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("kernel:   matvec_kernel"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("id 9, 1.2 ms"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("memory SOL:  67.53%"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bottleneck:  memory"), std::string::npos);
  EXPECT_NE(r.out.find("at roofline: no (threshold 85%)"), std::string::npos);
  EXPECT_NE(r.out.find("inst_mix_valu_pct"), std::string::npos);
}

TEST(InspectProfile, RocmJsonIsMachineReadable) {
  auto args = rocm_args("rocm_mi300x_matvec");
  args.push_back("--json");
  auto r = cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kernel"], "matvec_kernel");
  EXPECT_EQ(j["dispatch"]["dispatch_id"], 9);
  EXPECT_DOUBLE_EQ(j["metrics"]["sq_insts_valu"].get<double>(), 40'000'000);
  EXPECT_NEAR(j["roofline"]["memory_sol_pct"].get<double>(), 67.53, 0.01);
  EXPECT_EQ(j["roofline_config"]["early_stop"], false);
}

TEST(InspectProfile, RocmKernelOptionAndGfxNames) {
  auto args = rocm_args("rocm_mi300x_matvec");
  args.back() = "gfx942";
  args.insert(args.end(), {"--kernel", "matvec_finalize_kernel", "--json"});
  auto r = cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kernel"], "matvec_finalize_kernel");
  EXPECT_EQ(j["dispatch"]["dispatch_id"], 10);
}

TEST(InspectProfile, UnusableRocmInputPrintsTheRunsVerbatimErrorAndExits1) {
  std::string dir = std::filesystem::temp_directory_path() / ("kagent-inspect-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  write_file(dir + "/stats.csv", "Name,Calls,Duration(ns)\nkernel,1,2000000\n");
  write_file(dir + "/empty.csv", "");
  auto args = rocm_args("rocm_mi300x_matvec");
  args[2] = dir + "/stats.csv";
  auto r = cli(args);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "rocprof stats CSV has no AverageNs\n");
  args = rocm_args("rocm_mi300x_matvec");
  args[6] = dir + "/empty.csv";
  r = cli(args);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "rocprof PMC CSV has no counter rows\n");
  args = rocm_args("rocm_mi300x_matvec");
  args[4] = dir + "/missing_trace.csv";
  r = cli(args);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("rocprof completed without a usable CSV", 0), 0u) << r.err;
  std::filesystem::remove_all(dir);
}

TEST(InspectProfile, NvidiaPicksTheTargetsLastLaunchNotTheLastRow) {
  auto r = cli({"nvidia", "--ncu-csv", fixture("ncu_h200_matvec/ncu_raw.csv"), "--gpu-name", "NVIDIA H200", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kernel"], "matvec_kernel");
  EXPECT_EQ(j["dispatch"]["id"], 4);
  EXPECT_DOUBLE_EQ(j["roofline"]["memory_sol_pct"].get<double>(), 12.41);
  EXPECT_EQ(j["roofline"]["bottleneck"], "underutilized");
  auto text = cli({"nvidia", "--ncu-csv", fixture("ncu_h200_matvec/ncu_raw.csv"), "--gpu-name", "NVIDIA H200",
                   "--kernel", "matvec_kernel"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("ID 4 (last of 4 launches of this kernel; chosen by name)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("at roofline: no (threshold 95%)"), std::string::npos);
}

TEST(InspectProfile, NvidiaUnusableInputExits1) {
  auto r = cli({"nvidia", "--ncu-csv", "/nonexistent/ncu.csv", "--gpu-name", "NVIDIA H200"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ncu completed without a CSV (/nonexistent/ncu.csv)\n");
  auto r2 = cli({"nvidia", "--ncu-csv", fixture("ncu_h200_matvec/ncu_raw.csv"), "--gpu-name", "NVIDIA H200", "--kernel",
                 "nope"});
  EXPECT_EQ(r2.exit_code, 1);
  EXPECT_EQ(r2.err, "ncu CSV has no dispatch of kernel 'nope'\n");
}

TEST(InspectProfile, BadUsageExits2) {
  EXPECT_EQ(cli({}).exit_code, 2);
  EXPECT_EQ(cli({"rocm", "--stats", "x"}).exit_code, 2);  // required options missing
  auto unknown_gpu = cli({"nvidia", "--ncu-csv", fixture("ncu_h200_matvec/ncu_raw.csv"), "--gpu-name", "Voodoo 5"});
  EXPECT_EQ(unknown_gpu.exit_code, 2);
  EXPECT_NE(unknown_gpu.err.find("Voodoo 5"), std::string::npos);
  auto wrong_vendor = cli({"nvidia", "--ncu-csv", fixture("ncu_h200_matvec/ncu_raw.csv"), "--gpu-name",
                           "AMD Instinct MI300X"});
  EXPECT_EQ(wrong_vendor.exit_code, 2);
}
