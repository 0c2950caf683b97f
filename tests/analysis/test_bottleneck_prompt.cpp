// The bottleneck analysis prompt (SPEC §7.2, §14 A.33-A.34, A.44-A.45, B.83-B.84).
#include <gtest/gtest.h>

#include "platform/analysis/bottleneck.hpp"
#include "platform/common/errors.hpp"
#include "platform/gpu/specs.hpp"
#include "tests/prompt/prompt_test_util.hpp"

using namespace kagent;
using kagent::test::count_of;
using kagent::test::root;
using kagent::test::temp_file;
using nlohmann::json;

namespace {

const std::string kernel = "@triton.jit\ndef add_kernel(x_ptr, BLOCK: tl.constexpr):\n    pass\n";

json ncu_metrics() {
  return {{"sm__throughput.avg.pct_of_peak_sustained_elapsed", 23.456},
          {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 88.1},
          {"dram__bytes_read.sum", 123456789.0},
          {"smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct", 41.27},
          {"launch__registers_per_thread", 32},
          {"smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct", 50.0},
          {"l1tex__t_sector_hit_rate.pct", 12.0},
          {"some__new_metric.sum", 7},
          {"_raw_counters", {{"x", 1}}},
          {"device__attribute_max_threads", 1024}};
}

json rocm_metrics() {
  return {{"duration_ms", 2.4},          {"fetch_size_kb", 4194304.0},  {"write_size_kb", 0.0},
          {"achieved_bandwidth_gbps", 1789.57}, {"tcc_cache_hit_rate_pct", 10.0}, {"sq_insts_valu", 2097152.0},
          {"sq_insts_vmem_rd", 8388608.0}, {"inst_mix_valu_pct", 20.0}, {"inst_mix_vmem_pct", 80.0},
          {"compute_sol_pct", 20.0},      {"memory_sol_pct", 100.0}};
}

bottleneck_prompt_input input(const std::string& platform, const std::string& gpu, json metrics) {
  bottleneck_prompt_input in;
  in.kernel_code = kernel;
  in.platform = platform;
  in.gpu_name = gpu;
  in.metrics = std::move(metrics);
  return in;
}

/// The text between `title` and the next blank line.
std::string section(const std::string& p, const std::string& title) {
  auto a = p.find(title);
  if (a == std::string::npos) return "";
  auto z = p.find("\n\n", a);
  return p.substr(a, z == std::string::npos ? std::string::npos : z - a);
}

} // namespace

TEST(BottleneckPrompt, AsksForExactlyNDistinctDirectionsAsAJsonArray) {
  auto in = input("nvidia", "NVIDIA H200", ncu_metrics());
  in.num_bottlenecks = 3;
  in.num_causes = 2;
  in.num_fixes = 4;
  const std::string p = render_bottleneck_prompt(in, {}, root());
  EXPECT_NE(p.find("exactly 3 distinct bottleneck direction(s)"), std::string::npos) << p;
  EXPECT_NE(p.find("The array holds exactly 3 object(s)"), std::string::npos);
  EXPECT_NE(p.find("Each object has exactly 2 root cause(s)"), std::string::npos);
  EXPECT_NE(p.find("each root cause has exactly 4 fix(es)"), std::string::npos);
  EXPECT_NE(p.find("JSON array and nothing else"), std::string::npos);
  for (const char* k : {"\"category\"", "\"summary\"", "\"reasoning\"", "\"root_causes\"", "\"cause\"", "\"evidence\"",
                        "\"metric\"", "\"value\"", "\"interpretation\"", "\"fixes\"", "\"fix\"", "\"rationale\""})
    EXPECT_NE(p.find(k), std::string::npos) << k;
  for (const char* c : {"- memory:", "- compute:", "- underutilized:"}) EXPECT_NE(p.find(c), std::string::npos) << c;
  EXPECT_NE(p.find("```python\n" + kernel), std::string::npos);
}

TEST(BottleneckPrompt, NvidiaMetricsAreGroupedBySectionFromTheFlatMap) {
  const std::string p = render_bottleneck_prompt(input("nvidia", "NVIDIA H200", ncu_metrics()), {}, root());
  const std::string sm = section(p, "SM & Compute Utilization");
  EXPECT_NE(sm.find("SM throughput (compute SOL): 23.5%"), std::string::npos) << p;
  const std::string mem = section(p, "Memory Bandwidth & Cache");
  EXPECT_NE(mem.find("Memory throughput (memory SOL): 88.1%"), std::string::npos) << p;
  EXPECT_NE(mem.find("DRAM bytes read: 123000000 B"), std::string::npos) << mem;
  EXPECT_NE(mem.find("L1 hit rate: 12%"), std::string::npos);
  EXPECT_NE(section(p, "Memory Access Patterns").find("coalescing"), std::string::npos);
  EXPECT_NE(section(p, "Occupancy & Resources").find("Registers per thread: 32 registers"), std::string::npos);
  EXPECT_NE(section(p, "Stall Metrics (Warp Issue Stalls)").find("Long scoreboard stalls (global memory): 41.3%"),
            std::string::npos);
  EXPECT_NE(section(p, "Other Metrics").find("some__new_metric.sum: 7"), std::string::npos) << p;
  EXPECT_EQ(p.find("_raw_counters"), std::string::npos);
  EXPECT_EQ(p.find("device__attribute"), std::string::npos);
  EXPECT_EQ(p.find("Instruction Mix"), std::string::npos);
  EXPECT_EQ(p.find("NO HARDWARE PROFILE"), std::string::npos);
}

TEST(BottleneckPrompt, WrappedMetricsAreUnwrappedAndNestedOnesRejected) {
  const std::string p =
      render_bottleneck_prompt(input("nvidia", "NVIDIA H200", {{"ncu_metrics", ncu_metrics()}}), {}, root());
  EXPECT_NE(p.find("SM throughput (compute SOL): 23.5%"), std::string::npos);
  json nested{{"add_kernel", {{"sm__throughput.avg.pct_of_peak_sustained_elapsed", 1.0}}}};
  try {
    render_bottleneck_prompt(input("nvidia", "NVIDIA H200", nested), {}, root());
    FAIL() << "nested metrics accepted";
  } catch (const run_error& e) {
    EXPECT_NE(std::string(e.what()).find("'add_kernel'"), std::string::npos) << e.what();
  }
}

TEST(BottleneckPrompt, CdnaLabelsInstructionMixHonestlyAndUsesCu) {
  const std::string p = render_bottleneck_prompt(input("rocm", "AMD Instinct MI300X", rocm_metrics()), {}, root());
  const std::string mix = section(p, "Instruction Mix");
  EXPECT_NE(mix.find("NOT percent of any hardware peak"), std::string::npos) << p;
  EXPECT_NE(mix.find("VALU share of instructions: 20%"), std::string::npos) << mix;
  EXPECT_NE(mix.find("Vector memory share of instructions: 80%"), std::string::npos);
  // The [P]-style keys are shown under their real meaning, never as a SOL.
  EXPECT_NE(mix.find("(instruction mix; not a SOL): 100%"), std::string::npos) << mix;
  for (size_t pos = p.find("SOL"); pos != std::string::npos; pos = p.find("SOL", pos + 1)) {
    const auto line_start = p.rfind('\n', pos) + 1;
    const std::string line = p.substr(line_start, p.find('\n', pos) - line_start);
    EXPECT_NE(line.find("not a SOL"), std::string::npos) << "SOL claimed in: " << line;
  }
  EXPECT_NE(section(p, "Memory Bandwidth & Cache").find("Achieved DRAM bandwidth"), std::string::npos);
  // Spec section: CU labels and the row's numbers, each once.
  auto row = find_gpu_specs("AMD Instinct MI300X");
  ASSERT_TRUE(row);
  EXPECT_NE(p.find("- CU Count: " + std::to_string(row->sm_count)), std::string::npos);
  EXPECT_EQ(count_of(p, std::to_string(row->sm_count)), 1u);
  EXPECT_EQ(p.find("SM Count"), std::string::npos);
  // The fixes it asks for must respect the ROCm rules.
  EXPECT_NE(p.find("wavefront has 64 lanes"), std::string::npos);
}

TEST(BottleneckPrompt, NoProfileAsksForDirectionsFromTheCodeAlone) {
  for (const json& none : {json(nullptr), json::object()}) {
    const std::string p = render_bottleneck_prompt(input("rocm", "AMD Instinct MI250X", none), {}, root());
    EXPECT_NE(p.find("No hardware profile is available"), std::string::npos) << p;
    EXPECT_NE(p.find("from the code alone"), std::string::npos);
    EXPECT_EQ(p.find("HARDWARE METRICS"), std::string::npos);
    EXPECT_NE(p.find("grounded in the code"), std::string::npos);
  }
  const std::string cpu = render_bottleneck_prompt(input("cpu", "", nullptr), {}, root());
  EXPECT_NE(cpu.find("Triton's CPU interpreter"), std::string::npos);
  EXPECT_EQ(cpu.find("GPU SPECIFICATIONS"), std::string::npos);
}

TEST(BottleneckPrompt, RooflineBlock) {
  auto in = input("nvidia", "NVIDIA H200", ncu_metrics());
  in.roofline = {{"vendor", "nvidia"},       {"compute_sol_pct", 23.456}, {"memory_sol_pct", 88.1},
                 {"efficiency_pct", 88.1},   {"headroom_pct", 11.9},      {"at_roofline", false},
                 {"bottleneck", "memory"},   {"uses_tensor_cores", true}, {"warnings", json::array()}};
  const std::string p = render_bottleneck_prompt(in, {}, root());
  const std::string r = section(p, "ROOFLINE VERDICT");
  EXPECT_NE(r.find("Bottleneck: MEMORY"), std::string::npos) << p;
  EXPECT_NE(r.find("Compute SOL: 23.5%"), std::string::npos);
  EXPECT_NE(r.find("Efficiency: 88.1% of peak (headroom 11.9%)"), std::string::npos);
  EXPECT_NE(r.find("At roofline: No"), std::string::npos);
  EXPECT_NE(r.find("Tensor cores: Yes"), std::string::npos);
  EXPECT_NE(r.find("Warnings: None"), std::string::npos);
}

TEST(BottleneckPrompt, OverrideAndMissingOverride) {
  temp_file t("N={{num_bottlenecks}} profile={{#has_profile}}yes{{/has_profile}}{{^has_profile}}no{{/has_profile}}");
  auto in = input("nvidia", "", nullptr);
  in.num_bottlenecks = 4;
  EXPECT_EQ(render_bottleneck_prompt(in, {{"bottleneck_analysis", t.str()}}, root()), "N=4 profile=no");
  EXPECT_THROW(render_bottleneck_prompt(in, {{"bottleneck_analysis", "/nonexistent/b.mustache"}}, root()), user_error);
}

TEST(BottleneckPrompt, MetricSectionsDirect) {
  json s = metric_sections({{"duration_ms", 1.0}, {"zzz", "text"}, {"nan_metric", nullptr}}, true);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0]["title"], "Timing & Launch Resources");
  EXPECT_EQ(s[0]["lines"][0], "Kernel duration (last dispatch): 1 ms");
  EXPECT_EQ(s[1]["title"], "Other Metrics");
  EXPECT_EQ(s[1]["lines"][0], "zzz: text");
  EXPECT_TRUE(metric_sections(nullptr, false).empty());
}
