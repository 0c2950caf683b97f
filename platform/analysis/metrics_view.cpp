// The bottleneck prompt: metrics grouped by section (SPEC §7.2 item 5) and the template data.
#include <algorithm>
#include <cmath>
#include <vector>

#include "platform/analysis/bottleneck.hpp"
#include "platform/common/errors.hpp"
#include "platform/prompt/format.hpp"
#include "platform/prompt/prompt.hpp"

namespace kagent {

namespace {

using nlohmann::json;

struct metric_label {
  const char* key;
  int section;        ///< index into the schema's section titles
  const char* label;
  const char* unit;   ///< "%" is glued to the number, anything else follows a space
};

// NVIDIA (ncu, SPEC §5.2): names as collected, in the order the prompt lists them.
const std::vector<const char*> k_nvidia_sections = {
    "SM & Compute Utilization", "Memory Bandwidth & Cache", "Memory Access Patterns", "Occupancy & Resources",
    "Stall Metrics (Warp Issue Stalls)"};
const std::vector<metric_label> k_nvidia = {
    {"gpu__time_duration.sum", 0, "Kernel duration", "ns"},
    {"sm__throughput.avg.pct_of_peak_sustained_elapsed", 0, "SM throughput (compute SOL)", "%"},
    {"sm__cycles_active.avg", 0, "SM active cycles (avg per SM)", "cycles"},
    {"sm__warps_active.avg.pct_of_peak_sustained_active", 0, "Achieved occupancy (active warps)", "%"},
    {"sm__inst_executed.sum", 0, "Instructions executed", "inst"},
    {"sm__inst_executed_pipe_fp32.avg.pct_of_peak_sustained_active", 0, "FP32 pipe utilization", "%"},
    {"sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_active", 0, "Tensor pipe instruction utilization", "%"},
    {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", 0, "Tensor pipe active cycles", "%"},
    {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", 0, "Tensor pipe active cycles", "%"},
    {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 1, "Memory throughput (memory SOL)", "%"},
    {"dram__throughput.avg.pct_of_peak_sustained_elapsed", 1, "DRAM throughput", "%"},
    {"gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 1, "GPU DRAM throughput", "%"},
    {"dram__bytes_read.sum", 1, "DRAM bytes read", "B"},
    {"dram__bytes_write.sum", 1, "DRAM bytes written", "B"},
    {"dram__bytes.sum.per_second", 1, "DRAM bandwidth achieved", "B/s"},
    {"l1tex__t_sector_hit_rate.pct", 1, "L1 hit rate", "%"},
    {"l1tex__throughput.avg.pct_of_peak_sustained_active", 1, "L1 throughput", "%"},
    {"lts__t_sector_hit_rate.pct", 1, "L2 hit rate", "%"},
    {"lts__throughput.avg.pct_of_peak_sustained_active", 1, "L2 throughput", "%"},
    {"smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct", 2,
     "Global load efficiency (bytes used per sector fetched; coalescing)", "%"},
    {"smsp__sass_average_branch_targets_threads_uniform.pct", 2, "Branch uniformity (threads taking the same path)",
     "%"},
    {"launch__occupancy_limit_blocks", 3, "Occupancy limit from block count", "blocks"},
    {"launch__occupancy_limit_registers", 3, "Occupancy limit from registers", "blocks"},
    {"launch__occupancy_limit_shared_mem", 3, "Occupancy limit from shared memory", "blocks"},
    {"launch__registers_per_thread", 3, "Registers per thread", "registers"},
    {"launch__shared_mem_per_block_allocated", 3, "Shared memory per block", "B"},
    {"smsp__warp_issue_stalled_memory_dependency_per_warp_active.pct", 4, "Memory dependency stalls", "%"},
    {"smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct", 4, "Short scoreboard stalls (shared memory / MIO)",
     "%"},
    {"smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct", 4, "Long scoreboard stalls (global memory)", "%"},
    {"smsp__warp_issue_stalled_barrier_per_warp_active.pct", 4, "Barrier stalls", "%"},
    {"smsp__warp_issue_stalled_branch_resolving_per_warp_active.pct", 4, "Branch resolving stalls", "%"},
};

// ROCm (rocprofv3, SPEC §5.4): SQ instruction counts are counts; their shares are instruction mix,
// never percent of peak (SPEC §6.2 reviewer correction, §14 A.33-A.34).
const std::vector<const char*> k_rocm_sections = {"Timing & Launch Resources", "Memory Bandwidth & Cache",
                                                   "Instruction Counts", "Instruction Mix"};
const char* const k_mix_note =
    "shares of the counted instructions, NOT percent of any hardware peak; they say what the kernel issues, "
    "not how close it runs to a limit";
const std::vector<metric_label> k_rocm = {
    {"duration_ms", 0, "Kernel duration (last dispatch)", "ms"},
    {"vgpr_count", 0, "VGPRs per work-item", "registers"},
    {"sgpr_count", 0, "SGPRs per wavefront", "registers"},
    {"lds_bytes", 0, "LDS per workgroup", "B"},
    {"scratch_bytes", 0, "Scratch (register spill) per work-item", "B"},
    {"sq_waves", 0, "Wavefronts launched", "waves"},
    {"achieved_bandwidth_gbps", 1, "Achieved DRAM bandwidth ((FETCH_SIZE + WRITE_SIZE) / duration)", "GB/s"},
    {"fetch_size_kb", 1, "Data fetched from memory (FETCH_SIZE)", "KB"},
    {"write_size_kb", 1, "Data written to memory (WRITE_SIZE)", "KB"},
    {"tcc_cache_hit_rate_pct", 1, "L2 (TCC) hit rate", "%"},
    {"tcc_hit", 1, "L2 (TCC) hits", "requests"},
    {"tcc_miss", 1, "L2 (TCC) misses", "requests"},
    {"tcc_ea_rdreq", 1, "L2 read requests to memory (TCC_EA_RDREQ)", "requests"},
    {"tcc_ea_wrreq", 1, "L2 write requests to memory (TCC_EA_WRREQ)", "requests"},
    {"sq_insts_valu", 2, "Vector ALU instructions (SQ_INSTS_VALU)", "inst"},
    {"sq_insts_salu", 2, "Scalar ALU instructions (SQ_INSTS_SALU)", "inst"},
    {"sq_insts_vmem_rd", 2, "Vector memory read instructions (SQ_INSTS_VMEM_RD)", "inst"},
    {"sq_insts_vmem_wr", 2, "Vector memory write instructions (SQ_INSTS_VMEM_WR)", "inst"},
    {"sq_insts_lds", 2, "LDS instructions (SQ_INSTS_LDS)", "inst"},
    {"sq_wait_inst_any", 2, "Wave-cycles waiting for any instruction (SQ_WAIT_INST_ANY)", "cycles"},
    {"inst_mix_valu_pct", 3, "VALU share of instructions", "%"},
    {"inst_mix_salu_pct", 3, "SALU share of instructions", "%"},
    {"inst_mix_vmem_pct", 3, "Vector memory share of instructions", "%"},
    {"inst_mix_lds_pct", 3, "LDS share of instructions", "%"},
    // Older rocprof dictionaries ([P]) stored instruction-mix shares under SOL-like names.
    {"valu_utilization_pct", 3, "VALU share of instructions (instruction mix)", "%"},
    {"memory_bound_pct", 3, "Vector memory share of instructions (instruction mix)", "%"},
    {"compute_sol_pct", 3, "VALU share of instructions (instruction mix; not a SOL)", "%"},
    {"memory_sol_pct", 3, "Vector memory share of instructions (instruction mix; not a SOL)", "%"},
};

std::string value_text(const json& v, const std::string& unit) {
  std::string s = v.is_number() ? promptfmt::sig3(v.get<double>()) : v.is_boolean() ? v.dump() : v.get<std::string>();
  if (unit.empty()) return s;
  return unit == "%" ? s + "%" : s + " " + unit;
}

} // namespace

json metric_sections(const json& metrics_in, bool cdna) {
  const json* m = &metrics_in;
  if (m->is_object() && m->size() == 1)
    for (const char* key : {"ncu_metrics", "rocm_metrics"})
      if (m->contains(key) && m->at(key).is_object()) m = &m->at(key);
  json sections = json::array();
  if (!m->is_object()) return sections;

  const auto& schema = cdna ? k_rocm : k_nvidia;
  const auto& titles = cdna ? k_rocm_sections : k_nvidia_sections;
  std::vector<json> lines(titles.size(), json::array());
  json other = json::array();
  for (auto it = m->begin(); it != m->end(); ++it) {
    const std::string& k = it.key();
    const json& v = *it;
    if (k.empty() || k.front() == '_' || k.rfind("device__attribute_", 0) == 0 || v.is_null()) continue;
    if (v.is_object() || v.is_array())
      throw run_error("bottleneck prompt: metrics must be the flat metrics of one kernel; key '" + k + "' holds " +
                      v.type_name() + " (pass the profiled kernel's own metrics, not a map keyed by kernel name)");
    if (v.is_number() && !std::isfinite(v.get<double>())) continue;
    auto s = std::find_if(schema.begin(), schema.end(), [&](const metric_label& l) { return k == l.key; });
    if (s == schema.end()) {
      other.push_back(k + ": " + value_text(v, ""));
      continue;
    }
  }
  // Known metrics in schema order (not the map's alphabetical order).
  for (const auto& l : schema) {
    auto it = m->find(l.key);
    if (it == m->end() || it->is_null()) continue;
    if (it->is_number() && !std::isfinite(it->get<double>())) continue;
    lines[static_cast<size_t>(l.section)].push_back(std::string(l.label) + ": " + value_text(*it, l.unit));
  }
  for (size_t i = 0; i < titles.size(); ++i) {
    if (lines[i].empty()) continue;
    const bool mix = cdna && std::string(titles[i]) == "Instruction Mix";
    sections.push_back({{"title", titles[i]}, {"note", mix ? k_mix_note : ""}, {"lines", lines[i]}});
  }
  if (!other.empty()) sections.push_back({{"title", "Other Metrics"}, {"note", ""}, {"lines", other}});
  return sections;
}

std::string render_bottleneck_prompt(const bottleneck_prompt_input& in,
                                     const std::map<std::string, std::string>& overrides,
                                     const std::string& install_root) {
  using promptfmt::platform_family;
  const std::string fam = platform_family(in.platform);
  json gpu = promptfmt::gpu_view(in.gpu_name);
  const bool cdna = fam == "rocm" || (gpu.is_object() && gpu.value("is_cdna", false));
  json sections = metric_sections(in.metrics, cdna);

  json d;
  d["platform"] = fam;
  d["rocm"] = fam == "rocm";
  const auto last = in.kernel_code.find_last_not_of(" \t\r\n");
  d["kernel_code"] = last == std::string::npos ? "" : in.kernel_code.substr(0, last + 1);
  d["gpu"] = gpu;
  d["roofline"] = promptfmt::roofline_view(in.roofline);
  d["metric_sections"] = sections;
  d["has_profile"] = !sections.empty();
  d["no_profile_reason"] = fam == "cpu"    ? "the kernel runs in Triton's CPU interpreter, which has no hardware counters"
                           : fam == "noop" ? "this is a dry run without a GPU"
                                           : "the profiler did not produce metrics for it";
  d["num_bottlenecks"] = std::to_string(std::max(1, in.num_bottlenecks));
  d["num_causes"] = std::to_string(std::max(1, in.num_causes));
  d["num_fixes"] = std::to_string(std::max(1, in.num_fixes));
  d["platform_guidance"] = platform_guidance(in.platform, overrides, install_root);
  return render_prompt("bottleneck_analysis", d, overrides, install_root);
}

} // namespace kagent
