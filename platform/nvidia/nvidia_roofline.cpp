#include "platform/nvidia/nvidia_roofline.hpp"

#include "platform/common/errors.hpp"

namespace kagent {

namespace {
constexpr const char* compute_key = "sm__throughput.avg.pct_of_peak_sustained_elapsed";
constexpr const char* memory_key = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed";
// The profiler collects the _elapsed variant; the original analyzer read _active, which is never
// present, so tensor cores always read as unused (SPEC §14 B.82). The _active key is a fallback only.
constexpr const char* tensor_keys[] = {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
                                       "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"};
} // namespace

nvidia_roofline_analyzer::nvidia_roofline_analyzer(const roofline_config& cfg)
    : roofline_analyzer(resolve_roofline_settings(cfg, nvidia_roofline_defaults())) {}

roofline_result nvidia_roofline_analyzer::analyze(const metric_map& m) const {
  roofline_result r;
  r.vendor = "nvidia";
  auto get = [&](const char* k) -> std::optional<double> {
    auto it = m.find(k);
    return it == m.end() ? std::nullopt : std::optional<double>(it->second);
  };
  if (auto c = get(compute_key)) r.compute_sol_pct = round_to(*c, 2);
  if (auto mem = get(memory_key)) r.memory_sol_pct = round_to(*mem, 2);
  if (!r.compute_sol_pct && !r.memory_sol_pct) {
    r.warnings.push_back("Analysis failed - no SOL metrics in NCU data");
  } else {
    if (!r.compute_sol_pct) r.warnings.push_back(std::string(compute_key) + " missing; compute SOL taken as 0");
    if (!r.memory_sol_pct) r.warnings.push_back(std::string(memory_key) + " missing; memory SOL taken as 0");
  }
  for (const char* k : tensor_keys)
    if (auto t = get(k)) {
      r.uses_tensor_cores = *t > config().tensor_core_threshold_pct;
      r.details["tensor_pipe_active_pct"] = *t;
      break;
    }
  if (auto d = get("gpu__time_duration.sum")) r.details["duration_ms"] = round_to(*d / 1e6, 6);
  if (auto bw = get("dram__bytes.sum.per_second")) r.details["achieved_bandwidth_gbps"] = round_to(*bw / 1e9, 2);
  r.notes.push_back("compute SOL = sm__throughput, memory SOL = gpu__compute_memory_throughput (% of peak sustained, "
                    "elapsed)");
  classify(r);
  return r;
}

} // namespace kagent
