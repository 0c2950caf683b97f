#include <gtest/gtest.h>

#include "platform/common/errors.hpp"
#include "platform/gpu/specs.hpp"
#include "platform/nvidia/nvidia_roofline.hpp"
#include "platform/rocm/rocm_roofline.hpp"
#include "platform/profiling/roofline_factory.hpp"
#include "platform/rocm/rocprof_parse.hpp"

using namespace kagent;

namespace {

gpu_specs mi300x() {
  auto s = find_gpu_specs("AMD Instinct MI300X");
  EXPECT_TRUE(s.has_value());
  return s.value_or(gpu_specs{});
}

// The reviewer's MI300X matvec pair: 4 GiB read, hit 10 / miss 90 (rocm-review-thread.txt).
metric_map matvec(double vmem_rd, double valu, double ms) {
  std::map<std::string, double> raw{{"SQ_INSTS_VMEM_RD", vmem_rd}, {"SQ_INSTS_VALU", valu},
                                    {"TCC_HIT_sum", 10},            {"TCC_MISS_sum", 90},
                                    {"FETCH_SIZE", 4.0 * 1024 * 1024}, {"WRITE_SIZE", 0}};
  return rocm_metrics_from_counters(raw, ms);
}

} // namespace

TEST(RocmRoofline, SlowerDwordKernelIsNotAtRooflineAndReportsLowerMemorySolThanTheDwordx4One) {
  rocm_roofline_analyzer an({}, mi300x());
  auto a = an.analyze(matvec(8e6, 2e6, 2.4));  // dword loads, slower
  auto b = an.analyze(matvec(2e6, 2e6, 1.2));  // dwordx4 loads, faster
  ASSERT_TRUE(a.memory_sol_pct && b.memory_sol_pct);
  EXPECT_NEAR(*a.memory_sol_pct, 33.77, 0.01);  // 1,790 GB/s of 5,300
  EXPECT_NEAR(*b.memory_sol_pct, 67.53, 0.01);  // 3,579 GB/s of 5,300
  EXPECT_LT(*a.memory_sol_pct, *b.memory_sol_pct);
  EXPECT_FALSE(a.at_roofline);
  EXPECT_LT(a.efficiency_pct, b.efficiency_pct);
  EXPECT_NEAR(a.details.at("achieved_bandwidth_gbps"), 1789.57, 0.01);
  // The instruction mix (VMEM share 80% for A) is reported under its own name, not as SOL.
  EXPECT_DOUBLE_EQ(a.details.at("inst_mix_vmem_pct"), 80.0);
  EXPECT_DOUBLE_EQ(a.details.at("tcc_cache_hit_rate_pct"), 10.0);
}

TEST(RocmRoofline, ComputeSolComesFromValuAndMfmaCountersAgainstTheSpecPeak) {
  gpu_specs g;
  g.vendor = "amd";
  g.peak_fp32_tflops = 100;
  g.peak_fp16_tflops = 1000;
  g.peak_bf16_tflops = 1000;
  g.peak_memory_bw_gbps = 5000;
  g.wavefront_size = 64;
  rocm_roofline_analyzer an({}, g);
  // 1e9 VALU instr * 64 lanes * 2 FLOP in 2 ms = 64 TFLOP/s of 100 -> 64%.
  auto r = an.analyze({{"sq_insts_valu", 1e9}, {"duration_ms", 2.0}});
  ASSERT_TRUE(r.compute_sol_pct);
  EXPECT_NEAR(*r.compute_sol_pct, 64.0, 1e-9);
  EXPECT_FALSE(r.memory_sol_pct);  // FETCH/WRITE not collected: absent, not 0
  EXPECT_EQ(r.bottleneck, "compute");
  // 512 FLOP per BF16 MOPS: 2e9 * 512 in 2 ms = 512 TFLOP/s of 1000 -> 51.2% (> the vector 6.4%).
  auto m = an.analyze({{"sq_insts_valu", 1e8}, {"sq_insts_valu_mfma_mops_bf16", 2e9}, {"duration_ms", 2.0}});
  EXPECT_NEAR(*m.compute_sol_pct, 51.2, 1e-9);
  EXPECT_TRUE(m.uses_tensor_cores);
  // No SQ_INSTS_VALU: no compute SOL at all (SPEC §14 A.12).
  auto none = an.analyze({{"duration_ms", 2.0}, {"fetch_size_kb", 1000}, {"write_size_kb", 0}});
  EXPECT_FALSE(none.compute_sol_pct);
  ASSERT_TRUE(none.memory_sol_pct);
}

TEST(RocmRoofline, NoDurationOrNoSpecRowMeansNoSolAndAnUnknownVerdict) {
  rocm_roofline_analyzer no_spec({}, std::nullopt);
  auto r = no_spec.analyze(matvec(8e6, 2e6, 2.4));
  EXPECT_FALSE(r.compute_sol_pct);
  EXPECT_FALSE(r.memory_sol_pct);
  EXPECT_EQ(r.bottleneck, "unknown");
  EXPECT_DOUBLE_EQ(r.efficiency_pct, 0);
  EXPECT_FALSE(r.warnings.empty());
}

TEST(RocmRoofline, DefaultsAre85And40WithEarlyStopOffAndTheConfigIsExposed) {
  rocm_roofline_analyzer an({}, mi300x());
  EXPECT_DOUBLE_EQ(an.config().sol_threshold_pct, 85.0);
  EXPECT_DOUBLE_EQ(an.config().underutilized_threshold_pct, 40.0);
  EXPECT_FALSE(an.config().early_stop);
  nvidia_roofline_analyzer nv({});
  EXPECT_DOUBLE_EQ(nv.config().sol_threshold_pct, 95.0);
  EXPECT_DOUBLE_EQ(nv.config().underutilized_threshold_pct, 60.0);
  EXPECT_TRUE(nv.config().early_stop);
  roofline_config cfg;
  cfg.sol_threshold_pct = 70;
  cfg.early_stop = true;
  cfg.convergence_rounds = 3;
  rocm_roofline_analyzer custom(cfg, mi300x());
  EXPECT_DOUBLE_EQ(custom.config().sol_threshold_pct, 70.0);
  EXPECT_DOUBLE_EQ(custom.config().underutilized_threshold_pct, 40.0);  // unset: vendor default
  EXPECT_TRUE(custom.config().early_stop);
  EXPECT_EQ(custom.config().convergence_rounds, 3);
}

TEST(RocmRoofline, FiveRoundsAt86PercentConvergeButDoNotStopTheRunBecauseEarlyStopIsOff) {
  rocm_roofline_analyzer an({}, mi300x());
  roofline_result r;
  r.efficiency_pct = 86;
  r.at_roofline = true;
  for (int round = 1; round <= 4; ++round) {
    auto d = an.should_stop(r);
    EXPECT_FALSE(d.stop) << round;
  }
  auto d = an.should_stop(r);
  EXPECT_TRUE(d.stop);
  EXPECT_EQ(d.reason, "Converged (improvement 0.00% < 0.1%)");
  EXPECT_FALSE(an.stop_check(r));  // should_stop && config.early_stop
  an.reset_history();
  EXPECT_TRUE(an.history().empty());
}

TEST(NvidiaRoofline, AtRooflineStopsWithEarlyStopAndConvergenceNeedsFlatHistory) {
  nvidia_roofline_analyzer an({});
  auto r = an.analyze({{"sm__throughput.avg.pct_of_peak_sustained_elapsed", 20},
                       {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 96.4}});
  EXPECT_TRUE(r.at_roofline);
  EXPECT_EQ(r.bottleneck, "memory");
  auto d = an.should_stop(r);
  EXPECT_TRUE(d.stop);
  EXPECT_EQ(d.reason, "At roofline (96.4% SOL >= 95%)");
  EXPECT_TRUE(an.stop_check(r));
  nvidia_roofline_analyzer climbing({});
  roofline_result x;
  for (double e : {50.0, 55.0, 60.0, 65.0, 70.0}) {
    x.efficiency_pct = e;
    EXPECT_FALSE(climbing.should_stop(x).stop);
  }
}

TEST(NvidiaRoofline, ClassificationAndMissingMetrics) {
  nvidia_roofline_analyzer an({});
  auto under = an.analyze({{"sm__throughput.avg.pct_of_peak_sustained_elapsed", 30},
                           {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 59}});
  EXPECT_EQ(under.bottleneck, "underutilized");
  EXPECT_DOUBLE_EQ(under.headroom_pct, 41);
  auto compute = an.analyze({{"sm__throughput.avg.pct_of_peak_sustained_elapsed", 80},
                             {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 61}});
  EXPECT_EQ(compute.bottleneck, "compute");
  auto none = an.analyze({{"dram__bytes_read.sum", 1}});
  EXPECT_EQ(none.bottleneck, "unknown");
  EXPECT_DOUBLE_EQ(none.efficiency_pct, 0);
  EXPECT_DOUBLE_EQ(none.headroom_pct, 100);
  ASSERT_FALSE(none.warnings.empty());
  EXPECT_EQ(none.warnings[0], "Analysis failed - no SOL metrics in NCU data");
  auto half = an.analyze({{"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 70}});
  EXPECT_FALSE(half.compute_sol_pct);
  EXPECT_DOUBLE_EQ(half.efficiency_pct, 70);
  EXPECT_EQ(half.warnings.size(), 1u);
}

TEST(NvidiaRoofline, TensorCoresAreReadFromTheCollectedElapsedMetric) {
  nvidia_roofline_analyzer an({});
  auto r = an.analyze({{"sm__throughput.avg.pct_of_peak_sustained_elapsed", 80},
                       {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", 42}});
  EXPECT_TRUE(r.uses_tensor_cores);
  auto idle = an.analyze({{"sm__throughput.avg.pct_of_peak_sustained_elapsed", 80},
                          {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", 1}});
  EXPECT_FALSE(idle.uses_tensor_cores);
}

TEST(RooflineInput, AcceptsTheFlatMapDirectlyOrUnderNcuMetricsOrRocmMetricsAndRejectsScalars) {
  auto an = make_roofline_analyzer("rocm", {}, mi300x());
  nlohmann::json flat = {{"fetch_size_kb", 4194304}, {"write_size_kb", 0}, {"duration_ms", 2.4},
                         {"_raw_counters", {{"FETCH_SIZE", 4194304}}}};
  auto a = an->analyze_json(flat);
  auto b = an->analyze_json({{"ncu_metrics", flat}});
  auto c = an->analyze_json({{"rocm_metrics", flat}});
  ASSERT_TRUE(a.memory_sol_pct && b.memory_sol_pct && c.memory_sol_pct);
  EXPECT_DOUBLE_EQ(*a.memory_sol_pct, *b.memory_sol_pct);
  EXPECT_DOUBLE_EQ(*a.memory_sol_pct, *c.memory_sol_pct);
  EXPECT_THROW(an->analyze_json(86.0), user_error);
  EXPECT_THROW(an->analyze_json(nlohmann::json::array({1, 2})), user_error);
  // A per-kernel map is rejected, never unwrapped to its first entry.
  EXPECT_THROW(an->analyze_json({{"matvec_kernel", flat}}), user_error);
  EXPECT_EQ(make_roofline_analyzer("nvidia", {}, std::nullopt)->vendor(), "nvidia");
  EXPECT_THROW(make_roofline_analyzer("xpu", {}, std::nullopt), user_error);
}

TEST(RooflineOutput, ResultRoundTripsThroughJsonWithAbsentSolAsNull) {
  rocm_roofline_analyzer an({}, mi300x());
  auto r = an.analyze(matvec(2e6, 2e6, 1.2));
  nlohmann::json j = r;
  EXPECT_TRUE(j["compute_sol_pct"].is_number());
  EXPECT_EQ(j["bottleneck"], r.bottleneck);
  auto back = j.get<roofline_result>();
  EXPECT_EQ(back.memory_sol_pct, r.memory_sol_pct);
  EXPECT_EQ(back.notes, r.notes);
  roofline_result empty;
  nlohmann::json je = empty;
  EXPECT_TRUE(je["memory_sol_pct"].is_null());
  EXPECT_FALSE(je.get<roofline_result>().memory_sol_pct);
}

TEST(RooflineOutput, MetricsForTheLlmAreFlatFilteredAndRounded) {
  metric_map m{{"_raw_counters_total", 1}, {"device__attribute_clock_rate", 1980000}, {"dram__bytes_read.sum", 1.23456},
               {"duration_ms", 1.2}};
  auto out = metrics_for_llm(m);
  EXPECT_EQ(out.size(), 2u);
  EXPECT_DOUBLE_EQ(out.at("dram__bytes_read.sum"), 1.235);
}
