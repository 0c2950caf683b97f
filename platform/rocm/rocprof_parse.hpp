#pragma once
// rocprofv3 CSV parsing and merging (SPEC §5.4, §14 A.7-A.19). Every column is looked up by name;
// renamed columns of other releases (Dispatch_ID, Group_Segment_Size, a leading Guid, "Agent N")
// are accepted. The result describes ONE post-warmup dispatch of the profiled kernel.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "platform/profile_core/roofline.hpp"

namespace kagent {

/// One row of `<prefix>_kernel_stats.csv`.
struct kernel_stat {
  std::string name;
  double calls = 0;
  double total_ns = 0;
  double average_ns = 0;
};

/// Throws run_error "rocprof stats CSV has no AverageNs" when that column is missing (a
/// `Duration(ns)` column is not accepted), and "rocprof completed without a usable CSV" when the
/// file has no header or no row.
std::vector<kernel_stat> parse_kernel_stats(const std::string& csv_text);

/// The profiled kernel: largest TotalDurationNs without "at::", a tie keeps the later row.
/// Throws run_error when every kernel is a PyTorch one.
std::string choose_profiled_kernel(const std::vector<kernel_stat>& stats);

/// One KERNEL_DISPATCH row of `<prefix>_kernel_trace.csv`.
struct kernel_dispatch {
  std::string kernel_name;
  std::optional<long long> dispatch_id;
  std::string agent;                 ///< as printed: "4" or "Agent 4"
  long long start_ns = 0;           ///< ns; integers, since doubles lose ns at boot-relative scale
  long long end_ns = 0;
  std::optional<double> lds_bytes;   ///< LDS_Block_Size, or Group_Segment_Size on older releases
  std::optional<double> scratch_bytes;
  std::optional<double> vgpr_count;
  std::optional<double> sgpr_count;
  std::string workgroup_size;        ///< "XxYxZ" when present
  std::string grid_size;             ///< work-items, "XxYxZ"
  double duration_ms() const { return static_cast<double>(end_ns - start_ns) / 1e6; }
};

std::vector<kernel_dispatch> parse_kernel_trace(const std::string& csv_text);

/// The last dispatch of `kernel` (greatest Dispatch_Id, file order when absent): the measured call
/// after the wrapper's warm-ups. Throws run_error "rocprof kernel trace has no dispatch of kernel
/// '<name>'" — a trace without it is not a profile (SPEC §14 A.16).
kernel_dispatch last_dispatch_of(const std::vector<kernel_dispatch>& trace, const std::string& kernel);

/// The counters one PMC CSV holds for the profiled kernel.
struct pmc_counters {
  std::map<std::string, double> values;  ///< raw counter name -> value (only those present)
  std::optional<long long> dispatch_id;  ///< the dispatch the values come from, when known
  bool had_kernel_column = false;        ///< false: values are sums over every row (SPEC §5.4)
  bool long_format = true;
};

/// Long (`Counter_Name`/`Counter_Value`) or wide (one column per counter) format. With a kernel
/// column: at:: rows dropped, only `kernel`'s rows, per counter the greatest Dispatch_Id. Without
/// one: every value summed per counter. Throws run_error "rocprof PMC CSV has no counter rows" when
/// there is nothing (no row, or no row of `kernel`).
pmc_counters parse_counter_collection(const std::string& csv_text, const std::string& kernel);

/// The merged profile of one kernel.
struct rocprof_profile {
  std::string kernel_name;
  kernel_dispatch dispatch;                     ///< the timed dispatch
  std::map<std::string, double> raw_counters;   ///< rocprof names, as collected
  metric_map metrics;                           ///< flat, lower-case (SPEC §5.4), derived values added
};

/// Flat metrics from raw counters and the dispatch duration (SPEC §5.4): sq_*, tcc_hit, tcc_miss,
/// tcc_ea_rdreq/wrreq (from the EA0 or EA name), fetch_size_kb, write_size_kb, duration_ms, and
/// derived tcc_cache_hit_rate_pct, achieved_bandwidth_gbps, inst_mix_*_pct. Absent stays absent.
metric_map rocm_metrics_from_counters(const std::map<std::string, double>& raw, std::optional<double> duration_ms);

/// Merges parsed outputs. `kernel_override` (e.g. a known Triton kernel name) replaces the
/// busiest-kernel rule. Later PMC maps never overwrite a counter an earlier one provided.
rocprof_profile merge_rocprof(const std::vector<kernel_stat>& stats, const std::vector<kernel_dispatch>& trace,
                              const std::vector<std::string>& pmc_csv_texts,
                              const std::optional<std::string>& kernel_override = std::nullopt);

/// File-level entry (inspect-profile, the profiler actor): a missing stats or trace file raises
/// "rocprof completed without a usable CSV"; a missing PMC file raises the same.
rocprof_profile load_rocprof_profile(const std::string& stats_csv, const std::string& trace_csv,
                                     const std::vector<std::string>& pmc_csvs,
                                     const std::optional<std::string>& kernel_override = std::nullopt);

void to_json(nlohmann::json& j, const kernel_dispatch& d);
void to_json(nlohmann::json& j, const rocprof_profile& p);

} // namespace kagent
