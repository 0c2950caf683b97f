#include <gtest/gtest.h>

#include "platform/common/errors.hpp"
#include "platform/profile_core/profile_common.hpp"
#include "platform/rocm/rocprof_parse.hpp"
#include "test_support.hpp"
#include "platform/common/files.hpp"

using namespace kagent;
using kagent::test::fixture;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// The review's fixtures (rocm-review-thread.txt).
const char* review_stats =
    "Name,Calls,TotalDurationNs,AverageNs,Percentage\n"
    "at::native::vectorized_elementwise,4,8000000,2000000,80\n"
    "triton_kernel,4,2000000,500000,20\n";
const char* review_pmc =
    "Dispatch_ID,Kernel_Name,Counter_Name,Counter_Value\n"
    "1,triton_kernel,SQ_INSTS_VALU,100\n"
    "1,triton_kernel,SQ_INSTS_SALU,100\n"
    "2,triton_kernel,SQ_INSTS_VALU,100\n"
    "2,triton_kernel,SQ_INSTS_SALU,100\n"
    "3,at::native::vectorized_elementwise,SQ_INSTS_VALU,900\n"
    "3,at::native::vectorized_elementwise,SQ_INSTS_SALU,0\n";
const char* review_trace =
    "Kind,Dispatch_Id,Kernel_Name,Start_Timestamp,End_Timestamp\n"
    "KERNEL_DISPATCH,1,triton_kernel,1000,501000\n"
    "KERNEL_DISPATCH,2,triton_kernel,600000,1100000\n"
    "KERNEL_DISPATCH,3,at::native::vectorized_elementwise,1200000,3200000\n";

} // namespace

TEST(RocprofStats, StatsCsvWithoutAverageNsIsNotAProfile) {
  // The exact input from the review: a Duration(ns) column must not become duration_ms.
  EXPECT_EQ(error_of([] { parse_kernel_stats("Name,Calls,Duration(ns)\nkernel,1,2000000\n"); }),
            "rocprof stats CSV has no AverageNs");
  EXPECT_EQ(error_of([] { parse_kernel_stats(""); }), "rocprof completed without a usable CSV");
  EXPECT_EQ(error_of([] { parse_kernel_stats("\"Name\",\"Calls\",\"TotalDurationNs\",\"AverageNs\"\n"); }),
            "rocprof completed without a usable CSV");
}

TEST(RocprofStats, ProfiledKernelIsTheLargestTotalWithoutAtAndATieKeepsTheLaterRow) {
  EXPECT_EQ(choose_profiled_kernel(parse_kernel_stats(review_stats)), "triton_kernel");
  auto tie = parse_kernel_stats("Name,TotalDurationNs,AverageNs\nfirst,10,1\nsecond,10,1\nat::big,99,1\n");
  EXPECT_EQ(choose_profiled_kernel(tie), "second");
  EXPECT_THROW(choose_profiled_kernel(parse_kernel_stats("Name,TotalDurationNs,AverageNs\nat::x,1,1\n")), run_error);
}

TEST(RocprofTrace, DurationIsTheLastTritonDispatchNotTheAverageAndNotALaterHelper) {
  auto p = load_rocprof_profile(fixture("rocm_mi300x_matvec/kernel_stats.csv"),
                                fixture("rocm_mi300x_matvec/kernel_trace.csv"), {});
  EXPECT_EQ(p.kernel_name, "matvec_kernel");
  ASSERT_TRUE(p.dispatch.dispatch_id);
  EXPECT_EQ(*p.dispatch.dispatch_id, 9);
  EXPECT_DOUBLE_EQ(p.metrics.at("duration_ms"), 1.2);  // AverageNs would say 3.3675
  EXPECT_EQ(p.dispatch.agent, "4");
  EXPECT_DOUBLE_EQ(*p.dispatch.lds_bytes, 8192);
  EXPECT_EQ(p.dispatch.grid_size, "524288x1x1");
}

TEST(RocprofTrace, ATraceWithoutADispatchOfTheChosenKernelIsNotAProfile) {
  auto trace = parse_kernel_trace("Kind,Dispatch_Id,Kernel_Name,Start_Timestamp,End_Timestamp\n"
                                  "KERNEL_DISPATCH,1,other,0,10\n");
  EXPECT_EQ(error_of([&] { last_dispatch_of(trace, "triton_kernel"); }),
            "rocprof kernel trace has no dispatch of kernel 'triton_kernel'");
  EXPECT_EQ(error_of([] { load_rocprof_profile(fixture("rocm_mi300x_matvec/kernel_stats.csv"), "/nonexistent/t.csv", {}); })
                .rfind("rocprof completed without a usable CSV", 0),
            0u);
}

TEST(RocprofTrace, ToleratesGuidDispatchIdSpellingAgentStringsAndOlderLdsColumn) {
  auto trace = parse_kernel_trace(
      "Guid,Kind,Agent_Id,Queue_Id,Thread_Id,Dispatch_ID,Kernel_Id,Kernel_Name,Correlation_Id,Start_Timestamp,"
      "End_Timestamp,Private_Segment_Size,Group_Segment_Size,Arch_VGPR_Count,SGPR_Count\n"
      "ab12,KERNEL_DISPATCH,\"Agent 4\",1,9,12,3,\"kern<int, 2>(float*, (anon)::x)\",12,100,2100,0,4096,32,16\n"
      "ab12,KERNEL_DISPATCH,\"Agent 4\",1,9,13,3,\"kern<int, 2>(float*, (anon)::x)\",13,5000,5500,0,4096,32,16\n"
      "ab12,MEMORY_COPY,\"Agent 4\",1,9,14,3,\"kern<int, 2>(float*, (anon)::x)\",14,9000,99000,0,0,0,0\n");
  ASSERT_EQ(trace.size(), 2u);  // only KERNEL_DISPATCH rows
  auto d = last_dispatch_of(trace, "kern<int, 2>(float*, (anon)::x)");
  EXPECT_EQ(*d.dispatch_id, 13);
  EXPECT_EQ(d.agent, "Agent 4");
  EXPECT_DOUBLE_EQ(*d.lds_bytes, 4096);
  EXPECT_DOUBLE_EQ(*d.vgpr_count, 32);
  EXPECT_DOUBLE_EQ(d.duration_ms(), 0.0005);
}

TEST(RocprofPmc, ReviewFixtureKeepsTheLastDispatchOfTheProfiledKernelGiving100Not1100) {
  auto stats = parse_kernel_stats(review_stats);
  auto trace = parse_kernel_trace(review_trace);
  auto p = merge_rocprof(stats, trace, {review_pmc});
  EXPECT_EQ(p.kernel_name, "triton_kernel");
  EXPECT_DOUBLE_EQ(p.metrics.at("sq_insts_valu"), 100);
  EXPECT_DOUBLE_EQ(p.metrics.at("sq_insts_salu"), 100);
  EXPECT_DOUBLE_EQ(p.metrics.at("duration_ms"), 0.5);  // the Triton rows, not the PyTorch kernel's 2.0
  EXPECT_DOUBLE_EQ(p.metrics.at("inst_mix_valu_pct"), 50.0);
  EXPECT_EQ(p.metrics.count("compute_sol_pct"), 0u);  // instruction mix is never reported as SOL
  auto c = parse_counter_collection(review_pmc, "triton_kernel");
  EXPECT_EQ(*c.dispatch_id, 2);
  EXPECT_TRUE(c.had_kernel_column);
}

TEST(RocprofPmc, AFileWithoutAKernelColumnAddsEveryValue) {
  auto c = parse_counter_collection("Counter_Name,Counter_Value\nSQ_INSTS_VALU,900\nSQ_INSTS_SALU,100\nSQ_INSTS_VALU,100\n",
                                    "whatever");
  EXPECT_FALSE(c.had_kernel_column);
  EXPECT_DOUBLE_EQ(c.values.at("SQ_INSTS_VALU"), 1000);
  EXPECT_DOUBLE_EQ(c.values.at("SQ_INSTS_SALU"), 100);
}

TEST(RocprofPmc, WideFormatFollowsTheSameKernelAndDispatchFilterWithoutDescriptiveColumns) {
  const char* wide =
      "Guid,Dispatch_Id,Agent_Id,Kernel_Name,Grid_Size,LDS_Block_Size,VGPR_Count,SQ_WAVES,SQ_INSTS_VALU\n"
      "g,1,\"Agent 1\",\"triton_kernel\",64,0,32,10,100\n"
      "g,2,\"Agent 1\",\"triton_kernel\",64,0,32,11,110\n"
      "g,3,\"Agent 1\",\"at::native::copy<float, 2>(x)\",64,0,32,99,900\n"
      "g,4,\"Agent 1\",\"helper\",64,0,32,1,1\n";
  auto c = parse_counter_collection(wide, "triton_kernel");
  EXPECT_FALSE(c.long_format);
  EXPECT_EQ(c.values.size(), 2u);  // Grid_Size, LDS_Block_Size, VGPR_Count are not counters
  EXPECT_DOUBLE_EQ(c.values.at("SQ_WAVES"), 11);
  EXPECT_DOUBLE_EQ(c.values.at("SQ_INSTS_VALU"), 110);
}

TEST(RocprofPmc, AnEmptyFileOrOneWithoutTheKernelHasNoCounterRows) {
  EXPECT_EQ(error_of([] { parse_counter_collection("", "k"); }), "rocprof PMC CSV has no counter rows");
  EXPECT_EQ(error_of([] { parse_counter_collection("Dispatch_Id,Kernel_Name,Counter_Name,Counter_Value\n", "k"); }),
            "rocprof PMC CSV has no counter rows");
  EXPECT_EQ(error_of([] {
              parse_counter_collection("Dispatch_Id,Kernel_Name,Counter_Name,Counter_Value\n1,other,SQ_WAVES,1\n", "k");
            }),
            "rocprof PMC CSV has no counter rows for kernel 'k'");
}

TEST(RocprofMerge, FixtureKeepsMeasuredCountersOfTheMeasuredDispatchAndLeavesMissingOnesAbsent) {
  const std::string dir = fixture("rocm_mi300x_matvec/");
  // Only two passes' worth of counters: what was not collected must stay absent, never 0.
  auto full = read_file(dir + "counter_collection.csv");
  auto p = merge_rocprof(parse_kernel_stats(read_file(dir + "kernel_stats.csv")),
                         parse_kernel_trace(read_file(dir + "kernel_trace.csv")), {full});
  EXPECT_DOUBLE_EQ(p.metrics.at("sq_insts_valu"), 40'000'000);  // dispatch 9, not the 2x warm-ups
  EXPECT_DOUBLE_EQ(p.metrics.at("fetch_size_kb"), 4'194'304);
  EXPECT_DOUBLE_EQ(p.metrics.at("tcc_ea_rdreq"), 33'554'432);
  EXPECT_DOUBLE_EQ(p.metrics.at("tcc_hit"), 6'710'886);
  EXPECT_NEAR(p.metrics.at("tcc_cache_hit_rate_pct"), 10.0, 0.01);
  EXPECT_NEAR(p.metrics.at("achieved_bandwidth_gbps"), 3579.1, 0.1);
  EXPECT_EQ(p.raw_counters.count("TCC_EA0_RDREQ_sum"), 1u);

  auto only_sq = parse_counter_collection(
      "Dispatch_Id,Kernel_Name,Counter_Name,Counter_Value\n9,matvec_kernel,SQ_INSTS_VALU,900\n9,matvec_kernel,SQ_INSTS_SALU,100\n",
      "matvec_kernel");
  auto m = rocm_metrics_from_counters(only_sq.values, 2.0);
  for (const char* absent : {"tcc_hit", "tcc_miss", "fetch_size_kb", "write_size_kb", "tcc_cache_hit_rate_pct",
                             "achieved_bandwidth_gbps", "sq_insts_vmem_rd", "inst_mix_vmem_pct"})
    EXPECT_EQ(m.count(absent), 0u) << absent;
  EXPECT_DOUBLE_EQ(m.at("inst_mix_valu_pct"), 90.0);
}

TEST(RocprofMerge, EaFallbackNamesMapOntoTheSameMetric) {
  auto m = rocm_metrics_from_counters({{"TCC_EA_RDREQ_sum", 11}, {"TCC_EA_WRREQ_sum", 7}}, std::nullopt);
  EXPECT_DOUBLE_EQ(m.at("tcc_ea_rdreq"), 11);
  EXPECT_DOUBLE_EQ(m.at("tcc_ea_wrreq"), 7);
  EXPECT_EQ(m.count("duration_ms"), 0u);
}

TEST(RocprofMerge, KernelOverrideSelectsByNameInsteadOfBusiest) {
  auto p = merge_rocprof(parse_kernel_stats(review_stats), parse_kernel_trace(review_trace), {},
                         std::string("at::native::vectorized_elementwise"));
  EXPECT_DOUBLE_EQ(p.metrics.at("duration_ms"), 2.0);
  nlohmann::json j = p;
  EXPECT_EQ(j["kernel_name"], "at::native::vectorized_elementwise");
  EXPECT_EQ(j["dispatch"]["dispatch_id"], 3);
  EXPECT_TRUE(j["metrics"].is_object());
}
