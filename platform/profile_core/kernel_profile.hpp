#pragma once
// One profiled kernel as the search uses it: the flat metrics its profiler measured and the roofline
// verdict on them. Travels between actors as this value (messages/ has its inspect overload); it is
// JSON only where it is written down (sol_profile.json, analysis.json, program.db's run_state).
#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "platform/profile_core/roofline.hpp"

namespace kagent {

struct kernel_profile {
  std::string kernel_name;                 ///< the kernel the parser chose
  std::string platform;                    ///< the profiler that measured it: rocm | nvidia
  std::string label;                       ///< baseline | sol | final
  metric_map metrics;                      ///< flat; a metric that was not measured is absent
  std::optional<roofline_result> roofline; ///< none when no verdict could be derived
};

/// {"metrics": {...}, "roofline": {...} | null, "kernel_name", "platform", "label"}.
void to_json(nlohmann::json& j, const kernel_profile& p);
/// Reads to_json's shape. Metrics go through metrics_from_json (flat numbers only; a nested map is a
/// user_error); a missing or null roofline is none.
void from_json(const nlohmann::json& j, kernel_profile& p);

} // namespace kagent
