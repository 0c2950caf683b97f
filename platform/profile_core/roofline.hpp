#pragma once
// Roofline types shared by both vendors: the flat metric map of one profiled kernel, the verdict,
// the resolved thresholds, and the analyzer interface with its convergence history. The ROCm
// analyzer lives in platform/rocm/rocm_roofline.hpp, the NVIDIA one in platform/nvidia/.
#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "platform/config/config.hpp"

namespace kagent {

/// The metrics of ONE profiled kernel, flat: metric name -> value. Never keyed by kernel name
/// (SPEC §5.4, §14 A.32: a flat map never goes through a helper that unwraps "the first kernel").
/// A metric that was not measured is absent, never 0 (SPEC §14 A.11).
using metric_map = std::map<std::string, double>;

/// The thresholds an analyzer really uses, after the user's roofline_config was laid over the vendor
/// defaults (SPEC §6.1, §6.2).
struct roofline_settings {
  double sol_threshold_pct = 95.0;        ///< at_roofline when efficiency >= this
  double underutilized_threshold_pct = 60.0;
  bool early_stop = true;                 ///< the run's stop check reads this (SPEC §14 A.29)
  int convergence_rounds = 5;
  double convergence_threshold_pct = 0.1; ///< "min_improvement_pct"
  double tensor_core_threshold_pct = 5.0; ///< NVIDIA only
};

/// NVIDIA defaults: 95 / 60, early_stop true.
roofline_settings nvidia_roofline_defaults();
/// ROCm defaults: 85 / 40, early_stop false (SPEC §6.2, §14 A.30, A.35).
roofline_settings rocm_roofline_defaults();
/// `defaults` with every field the user set in `cfg` replaced (negative or unset = keep default).
roofline_settings resolve_roofline_settings(const roofline_config& cfg, const roofline_settings& defaults);

/// The verdict for one kernel. Each SOL is a percentage of a measured peak, or absent when it could
/// not be derived from what was collected (then `notes` says why).
struct roofline_result {
  std::string vendor;                      ///< "nvidia" or "rocm"
  std::optional<double> compute_sol_pct;
  std::optional<double> memory_sol_pct;
  double efficiency_pct = 0;               ///< max of the SOLs present
  double headroom_pct = 100;               ///< max(0, 100 - efficiency)
  bool at_roofline = false;
  std::string bottleneck = "unknown";      ///< memory | compute | underutilized | unknown
  bool uses_tensor_cores = false;
  /// Supporting numbers under their real names (achieved_bandwidth_gbps, achieved_tflops,
  /// inst_mix_valu_pct, tcc_cache_hit_rate_pct, ...). Instruction-mix shares are never SOL.
  std::map<std::string, double> details;
  std::vector<std::string> notes;          ///< how each number was derived, and what is missing
  std::vector<std::string> warnings;
};

void to_json(nlohmann::json& j, const roofline_result& r);
void from_json(const nlohmann::json& j, roofline_result& r);
void to_json(nlohmann::json& j, const roofline_settings& s);

/// Result of the stop rule of SPEC §6.1.
struct stop_decision {
  bool stop = false;
  std::string reason;
};

/// Reads metrics handed over as JSON: a flat object of numbers, or that object under the key
/// "ncu_metrics" or "rocm_metrics" (the two spellings callers use; SPEC §14 A.31). Keys starting
/// with '_' (e.g. "_raw_counters") and null values are skipped. A scalar, an array, or a nested
/// per-kernel map is rejected with a user_error — never unwrapped (SPEC §14 A.32).
metric_map metrics_from_json(const nlohmann::json& j);

/// The metrics an LLM prompt should see (SPEC §14 B.84): the flat map of the profiled kernel without
/// bookkeeping keys ('_'-prefixed), device attributes or non-finite values, rounded to 3 places.
metric_map metrics_for_llm(const metric_map& m);

/// A roofline analyzer: analysis plus the run-level convergence history. Both vendors expose
/// `config()` (SPEC §14 A.29); the caller stops only when `stop_check` says so.
class roofline_analyzer {
public:
  explicit roofline_analyzer(roofline_settings s) : settings_(s) {}
  virtual ~roofline_analyzer() = default;

  const roofline_settings& config() const { return settings_; }
  virtual std::string vendor() const = 0;

  /// Analyzes the flat metrics of one kernel.
  virtual roofline_result analyze(const metric_map& metrics) const = 0;
  /// Same, from JSON (see metrics_from_json).
  roofline_result analyze_json(const nlohmann::json& metrics) const { return analyze(metrics_from_json(metrics)); }

  /// SPEC §6.1 should_stop: records the efficiency, then "At roofline (...)" when early_stop and at
  /// roofline, or "Converged (improvement x% < t%)" when the last `convergence_rounds` efficiencies
  /// span less than the threshold. Returns true for convergence even when early_stop is false.
  stop_decision should_stop(const roofline_result& r);
  /// The run's stop check: should_stop(r).stop && config().early_stop (SPEC §14 A.29, A.30).
  bool stop_check(const roofline_result& r) { return should_stop(r).stop && settings_.early_stop; }
  void reset_history() { history_.clear(); }
  const std::vector<double>& history() const { return history_; }

protected:
  /// Shared tail of both analyzers: efficiency, headroom, at_roofline and the classification.
  void classify(roofline_result& r) const;

private:
  roofline_settings settings_;
  std::vector<double> history_;
};

/// Rounds to `places` decimals (results are reported at 2 places, LLM metrics at 3).
double round_to(double v, int places);

} // namespace kagent
