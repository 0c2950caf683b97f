#include "platform/prompt/format.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "platform/gpu/specs.hpp"

namespace kagent::promptfmt {

std::string platform_family(const std::string& platform) {
  std::string p;
  for (char c : platform) p.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (p == "rocm" || p == "amd" || p == "hip") return "rocm";
  if (p == "cuda" || p == "nvidia") return "cuda";
  return p;
}

bool is_known(double v) { return std::isfinite(v) && v >= 0; }

std::optional<double> number_at(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  double v = it->get<double>();
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

std::string string_at(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_boolean()) return it->get<bool>() ? "true" : "false";
  if (it->is_number_integer()) return std::to_string(it->get<long long>());
  if (it->is_number()) return sig3(it->get<double>());
  return "";
}

bool bool_at(const nlohmann::json& j, const char* key, bool fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  if (it == j.end() || !it->is_boolean()) return fallback;
  return it->get<bool>();
}

std::string fixed(double v, int places) { return fmt::format("{:.{}f}", v, places); }

std::string sig3(double v) {
  if (!std::isfinite(v)) return "n/a";
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a < 1e-3 || a >= 1e15) return fmt::format("{:.3g}", v);
  const int digits = static_cast<int>(std::floor(std::log10(a))) + 1;  // digits before the point
  if (digits >= 3) {
    const double scale = std::pow(10.0, digits - 3);
    return fmt::format("{:.0f}", std::round(v / scale) * scale);
  }
  std::string s = fmt::format("{:.{}f}", v, 3 - digits);
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  return s;
}

std::string plain(double v) { return fmt::format("{:g}", v); }

nlohmann::json gpu_view(const std::string& gpu_name) {
  if (gpu_name.empty()) return nullptr;
  auto row = find_gpu_specs(gpu_name);
  if (!row) return nullptr;
  const gpu_specs& s = *row;
  const std::string unit = s.compute_unit_label();
  const bool amd = s.vendor == "amd";
  nlohmann::json lines = nlohmann::json::array();
  auto add = [&](const std::string& label, const std::string& value) {
    lines.push_back({{"label", label}, {"value", value}});
  };
  add("Name", s.name);
  if (!s.architecture.empty())
    add("Architecture", s.gfx_target.empty() ? s.architecture : s.architecture + " (" + s.gfx_target + ")");
  if (s.peak_memory_bw_gbps > 0) add("Peak Memory Bandwidth", plain(s.peak_memory_bw_gbps) + " GB/s");
  if (s.peak_fp32_tflops > 0) add("Peak FP32", plain(s.peak_fp32_tflops) + " TFLOPS");
  if (s.peak_fp16_tflops > 0) add("Peak FP16 (dense)", plain(s.peak_fp16_tflops) + " TFLOPS");
  if (s.peak_bf16_tflops > 0) add("Peak BF16 (dense)", plain(s.peak_bf16_tflops) + " TFLOPS");
  if (s.sm_count > 0) add(unit + " Count", std::to_string(s.sm_count));
  if (s.max_threads_per_sm > 0) add("Max Threads per " + unit, std::to_string(s.max_threads_per_sm));
  if (s.l1_cache_kb > 0) add("L1 Cache per " + unit, plain(s.l1_cache_kb) + " KB");
  if (s.l2_cache_mb > 0) add("L2 Cache (total)", plain(s.l2_cache_mb) + " MB");
  if (s.memory_gb > 0) add("Memory", plain(s.memory_gb) + " GB" + (s.memory_type.empty() ? "" : " " + s.memory_type));
  if (s.wavefront_size > 0) add(amd ? "Wavefront Size" : "Warp Size", std::to_string(s.wavefront_size));
  return {{"name", s.name},
          {"vendor", s.vendor},
          {"architecture", s.architecture},
          {"unit", unit},
          {"is_cdna", amd},
          {"lines", lines}};
}

nlohmann::json roofline_view(const nlohmann::json& r) {
  if (!r.is_object()) return nullptr;
  std::string bn = string_at(r, "bottleneck");
  if (bn.empty()) bn = "unknown";
  std::string upper;
  for (char c : bn) upper.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  const std::string vendor = platform_family(string_at(r, "vendor"));
  auto pct = [&](const char* key) {
    auto v = number_at(r, key);
    return v ? fixed(*v, 1) + "%" : std::string("not available");
  };
  nlohmann::json lines = nlohmann::json::array();
  lines.push_back("Bottleneck: " + upper);
  lines.push_back("Compute SOL: " + pct("compute_sol_pct"));
  lines.push_back("Memory SOL: " + pct("memory_sol_pct"));
  lines.push_back("Efficiency: " + pct("efficiency_pct") + " of peak (headroom " + pct("headroom_pct") + ")");
  lines.push_back(std::string("At roofline: ") + (bool_at(r, "at_roofline", false) ? "Yes" : "No"));
  if (vendor == "cuda")
    lines.push_back(std::string("Tensor cores: ") + (bool_at(r, "uses_tensor_cores", false) ? "Yes (active)" : "No (inactive)"));
  if (auto it = r.find("details"); it != r.end() && it->is_object()) {
    for (auto d = it->begin(); d != it->end(); ++d)
      if (d->is_number()) lines.push_back(d.key() + ": " + sig3(d->get<double>()));
  }
  nlohmann::json warnings = nlohmann::json::array();
  if (auto it = r.find("warnings"); it != r.end() && it->is_array())
    for (const auto& w : *it)
      if (w.is_string() && !w.get<std::string>().empty()) warnings.push_back(w);
  nlohmann::json notes = nlohmann::json::array();
  if (auto it = r.find("notes"); it != r.end() && it->is_array())
    for (const auto& n : *it)
      if (n.is_string() && !n.get<std::string>().empty()) notes.push_back(n);
  nlohmann::json view{{"bottleneck", upper}, {"lines", lines}, {"notes", notes}};
  view["has_warnings"] = !warnings.empty();
  std::string text;
  for (const auto& w : warnings) text += (text.empty() ? "" : "; ") + w.get<std::string>();
  view["warnings_text"] = text.empty() ? "None" : text;
  if (warnings.empty()) warnings.push_back("None");
  view["warnings"] = warnings;
  return view;
}

} // namespace kagent::promptfmt
