#include "platform/profile_core/roofline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "platform/common/errors.hpp"

namespace kagent {

roofline_settings nvidia_roofline_defaults() { return roofline_settings{}; }

roofline_settings rocm_roofline_defaults() {
  roofline_settings s;
  s.sol_threshold_pct = 85.0;
  s.underutilized_threshold_pct = 40.0;
  s.early_stop = false;
  return s;
}

roofline_settings resolve_roofline_settings(const roofline_config& cfg, const roofline_settings& d) {
  roofline_settings s = d;
  if (cfg.sol_threshold_pct >= 0) s.sol_threshold_pct = cfg.sol_threshold_pct;
  if (cfg.underutilized_threshold_pct >= 0) s.underutilized_threshold_pct = cfg.underutilized_threshold_pct;
  if (cfg.early_stop) s.early_stop = *cfg.early_stop;
  if (cfg.convergence_rounds > 0) s.convergence_rounds = cfg.convergence_rounds;
  if (cfg.convergence_threshold_pct >= 0) s.convergence_threshold_pct = cfg.convergence_threshold_pct;
  return s;
}

double round_to(double v, int places) {
  double f = std::pow(10.0, places);
  return std::round(v * f) / f;
}

namespace {
nlohmann::json opt_json(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
std::optional<double> opt_from(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<double>();
}
} // namespace

void to_json(nlohmann::json& j, const roofline_result& r) {
  j = nlohmann::json{{"vendor", r.vendor},
                     {"compute_sol_pct", opt_json(r.compute_sol_pct)},
                     {"memory_sol_pct", opt_json(r.memory_sol_pct)},
                     {"efficiency_pct", r.efficiency_pct},
                     {"headroom_pct", r.headroom_pct},
                     {"at_roofline", r.at_roofline},
                     {"bottleneck", r.bottleneck},
                     {"uses_tensor_cores", r.uses_tensor_cores},
                     {"details", r.details},
                     {"notes", r.notes},
                     {"warnings", r.warnings}};
}

void from_json(const nlohmann::json& j, roofline_result& r) {
  r = roofline_result{};
  r.vendor = j.value("vendor", std::string{});
  r.compute_sol_pct = opt_from(j, "compute_sol_pct");
  r.memory_sol_pct = opt_from(j, "memory_sol_pct");
  r.efficiency_pct = j.value("efficiency_pct", 0.0);
  r.headroom_pct = j.value("headroom_pct", 100.0);
  r.at_roofline = j.value("at_roofline", false);
  r.bottleneck = j.value("bottleneck", std::string{"unknown"});
  r.uses_tensor_cores = j.value("uses_tensor_cores", false);
  if (j.contains("details")) r.details = j.at("details").get<std::map<std::string, double>>();
  if (j.contains("notes")) r.notes = j.at("notes").get<std::vector<std::string>>();
  if (j.contains("warnings")) r.warnings = j.at("warnings").get<std::vector<std::string>>();
}

void to_json(nlohmann::json& j, const roofline_settings& s) {
  j = nlohmann::json{{"sol_threshold_pct", s.sol_threshold_pct},
                     {"underutilized_threshold_pct", s.underutilized_threshold_pct},
                     {"early_stop", s.early_stop},
                     {"convergence_rounds", s.convergence_rounds},
                     {"convergence_threshold_pct", s.convergence_threshold_pct},
                     {"tensor_core_threshold_pct", s.tensor_core_threshold_pct}};
}

metric_map metrics_from_json(const nlohmann::json& in) {
  const nlohmann::json* j = &in;
  if (j->is_object()) {
    for (const char* key : {"ncu_metrics", "rocm_metrics"})
      if (j->contains(key) && j->size() == 1) {
        j = &j->at(key);
        break;
      }
  }
  if (!j->is_object())
    throw user_error(std::string("roofline metrics must be a flat object of metric name -> number, got ") +
                     j->type_name());
  metric_map m;
  for (auto it = j->begin(); it != j->end(); ++it) {
    const std::string& k = it.key();
    if (!k.empty() && k.front() == '_') continue;
    if (it->is_null()) continue;
    if (!it->is_number())
      throw user_error("roofline metrics must be a flat object of metric name -> number; key '" + k +
                       "' holds " + it->type_name() +
                       " (pass the metrics of one kernel, not a map keyed by kernel name)");
    m[k] = it->get<double>();
  }
  return m;
}

metric_map metrics_for_llm(const metric_map& m) {
  metric_map out;
  for (const auto& [k, v] : m) {
    if (k.empty() || k.front() == '_') continue;
    if (k.rfind("device__attribute_", 0) == 0) continue;
    if (!std::isfinite(v)) continue;
    out[k] = round_to(v, 3);
  }
  return out;
}

stop_decision roofline_analyzer::should_stop(const roofline_result& r) {
  history_.push_back(r.efficiency_pct);
  if (settings_.early_stop && r.at_roofline)
    return {true, fmt::format("At roofline ({:.1f}% SOL >= {:g}%)", r.efficiency_pct, settings_.sol_threshold_pct)};
  auto n = static_cast<size_t>(std::max(1, settings_.convergence_rounds));
  if (history_.size() >= n) {
    auto first = history_.end() - static_cast<std::ptrdiff_t>(n);
    auto [lo, hi] = std::minmax_element(first, history_.end());
    double spread = *hi - *lo;
    if (spread < settings_.convergence_threshold_pct)
      return {true, fmt::format("Converged (improvement {:.2f}% < {:g}%)", spread, settings_.convergence_threshold_pct)};
  }
  return {false, ""};
}

void roofline_analyzer::classify(roofline_result& r) const {
  double c = r.compute_sol_pct.value_or(0.0);
  double m = r.memory_sol_pct.value_or(0.0);
  if (!r.compute_sol_pct && !r.memory_sol_pct) {
    r.efficiency_pct = 0;
    r.headroom_pct = 100;
    r.at_roofline = false;
    r.bottleneck = "unknown";
    return;
  }
  r.efficiency_pct = round_to(std::max(c, m), 2);
  r.headroom_pct = round_to(std::max(0.0, 100.0 - r.efficiency_pct), 2);
  r.at_roofline = r.efficiency_pct >= settings_.sol_threshold_pct;
  const double u = settings_.underutilized_threshold_pct;
  if (c < u && m < u)
    r.bottleneck = "underutilized";
  else if (m >= c)
    r.bottleneck = "memory";
  else
    r.bottleneck = "compute";
}

} // namespace kagent
