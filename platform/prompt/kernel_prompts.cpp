// kernel_optimization and kernel_refinement: the typed inputs turned into template data.
#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "platform/prompt/format.hpp"
#include "platform/prompt/prompt.hpp"
#include "platform/common/text.hpp"

namespace kagent {

namespace {

using nlohmann::json;
using namespace promptfmt;

/// The last `n` elements of an array (anything else: empty).
std::vector<json> last_n(const json& arr, size_t n) {
  std::vector<json> out;
  if (!arr.is_array()) return out;
  const size_t start = arr.size() > n ? arr.size() - n : 0;
  for (size_t i = start; i < arr.size(); ++i) out.push_back(arr[i]);
  return out;
}

bool positive(double v) { return std::isfinite(v) && v > 0; }

/// Code as shown inside a fence: trailing blank lines and spaces dropped, nothing else changed.
std::string code_block(const std::string& s) {
  const auto e = s.find_last_not_of(" \t\r\n");
  return e == std::string::npos ? "" : s.substr(0, e + 1);
}

/// A field that is a string in SPEC §2.7 but may arrive as an object ({cause} / {fix}).
std::string text_or_field(const json& j, const char* key, const char* inner) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  if (it == j.end()) return "";
  if (it->is_object()) return string_at(*it, inner);
  return string_at(j, key);
}

std::vector<std::string> string_list(const json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.is_object()) return out;
  auto it = j.find(key);
  if (it == j.end()) return out;
  if (it->is_string()) {
    if (!trim(it->get<std::string>()).empty()) out.push_back(trim(it->get<std::string>()));
    return out;
  }
  if (!it->is_array()) return out;
  for (const auto& e : *it)
    if (e.is_string() && !trim(e.get<std::string>()).empty()) out.push_back(trim(e.get<std::string>()));
  return out;
}

std::string config_changes_text(const json& a) {
  auto it = a.is_object() ? a.find("config_changes") : a.end();
  if (!a.is_object() || it == a.end() || !it->is_object() || it->empty()) return "none";
  std::string s;
  for (auto c = it->begin(); c != it->end(); ++c) {
    if (!s.empty()) s += ", ";
    s += c.key() + ": " + (c->is_string() ? c->get<std::string>() : c->dump());
  }
  return s;
}

/// Improvement in percent (positive = faster), from the dict or its two times.
std::optional<double> improvement_of(const json& a) {
  if (auto v = number_at(a, "improvement_pct")) return v;
  auto before = number_at(a, "time_before_ms"), after = number_at(a, "time_after_ms");
  if (before && after && positive(*before) && positive(*after)) return 100.0 * (*before - *after) / *before;
  return std::nullopt;
}

json attempt_view(const json& a, size_t index) {
  json v;
  v["index"] = std::to_string(index);
  const std::string round = string_at(a, "round_num");
  v["round"] = round.empty() ? "?" : round;
  const bool passed = bool_at(a, "passed_verification", true);
  const auto imp = improvement_of(a);
  const bool improved = bool_at(a, "is_improvement", imp && *imp > 0);
  v["status"] = !passed ? "failed verification" : (improved ? "improved" : "no improvement");
  v["change"] = "";
  if (passed && imp) v["change"] = fixed(std::fabs(*imp), 1) + (*imp >= 0 ? "% faster" : "% slower");
  v["bottleneck_category"] = string_at(a, "bottleneck_category");
  v["root_cause"] = text_or_field(a, "root_cause", "cause");
  v["fix"] = text_or_field(a, "recommended_fix", "fix");
  v["config_changes"] = config_changes_text(a);
  v["timing"] = "";
  v["sol"] = "";
  v["error"] = "";
  if (passed) {
    auto before = number_at(a, "time_before_ms"), after = number_at(a, "time_after_ms");
    auto ms = [](const std::optional<double>& t) { return t && positive(*t) ? fixed(*t, 4) + " ms" : std::string("not measured"); };
    if ((before && positive(*before)) || (after && positive(*after))) v["timing"] = ms(before) + " -> " + ms(after);
    std::string sol;
    for (auto [key, label] : {std::pair{"compute_sol_pct", "compute"}, std::pair{"memory_sol_pct", "memory"},
                              std::pair{"combined_sol_pct", "combined"}}) {
      auto x = number_at(a, key);
      if (!x || *x < 0) continue;
      if (!sol.empty()) sol += ", ";
      sol += std::string(label) + " " + fixed(*x, 1) + "%";
    }
    v["sol"] = sol;
  } else {
    std::string err = string_at(a, "error_message");
    v["error"] = err.empty() ? "(no error message recorded)" : head_text(err, 200);
  }
  return v;
}

json reflexion_view(const json& r, size_t index) {
  json v;
  v["index"] = std::to_string(index);
  const std::string round = string_at(r, "round_num");
  v["round"] = round.empty() ? "?" : round;
  v["effectiveness"] = bool_at(r, "was_fix_effective", false) ? "effective" : "not effective";
  v["diagnosis_verdict"] = bool_at(r, "was_diagnosis_correct", false) ? "correct" : "wrong";
  v["root_cause_diagnosed"] = string_at(r, "root_cause_diagnosed");
  v["fix_applied"] = string_at(r, "fix_applied");
  v["expected_outcome"] = string_at(r, "expected_outcome");
  v["actual_outcome"] = string_at(r, "actual_outcome");
  v["delta"] = "";
  if (auto d = number_at(r, "performance_delta_pct")) v["delta"] = fmt::format("{:+.1f}%", *d);
  v["reasoning"] = string_at(r, "reasoning");
  v["lessons"] = string_list(r, "lessons");
  return v;
}

/// The direction to work on: to_json(bottleneck) (root_causes[], recommended_fixes[]) or the
/// original's shape (root_cause{}, recommended_fix{}).
json bottleneck_view(const json& b) {
  if (!b.is_object()) return nullptr;
  json v;
  std::string cat = string_at(b, "category");
  if (cat.empty()) cat = "underutilized";
  std::string upper;
  for (char c : cat) upper.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  v["category"] = cat;
  v["category_upper"] = upper;
  v["summary"] = string_at(b, "summary");
  v["reasoning"] = string_at(b, "reasoning");
  json cause;
  if (auto it = b.find("root_causes"); it != b.end() && it->is_array() && !it->empty() && (*it)[0].is_object())
    cause = (*it)[0];
  else if (auto rc = b.find("root_cause"); rc != b.end() && rc->is_object())
    cause = *rc;
  json fix;
  if (auto it = b.find("recommended_fixes"); it != b.end() && it->is_array() && !it->empty() && (*it)[0].is_object())
    fix = (*it)[0];
  else if (auto rf = b.find("recommended_fix"); rf != b.end() && rf->is_object())
    fix = *rf;
  else if (cause.is_object() && cause.contains("fixes") && cause["fixes"].is_array() && !cause["fixes"].empty())
    fix = cause["fixes"][0];
  v["root_cause"] = nullptr;
  if (cause.is_object()) {
    json ev = json::array();
    if (auto it = cause.find("evidence"); it != cause.end() && it->is_array())
      for (const auto& e : *it)
        if (e.is_object())
          ev.push_back({{"metric", string_at(e, "metric")},
                        {"value", string_at(e, "value")},
                        {"interpretation", string_at(e, "interpretation")}});
    v["root_cause"] = {{"cause", string_at(cause, "cause")}, {"evidence", ev}};
  }
  v["recommended_fix"] = nullptr;
  if (fix.is_object()) v["recommended_fix"] = {{"fix", string_at(fix, "fix")}, {"rationale", string_at(fix, "rationale")}};
  return v;
}

} // namespace

std::string render_optimization_prompt(const optimization_prompt_input& in,
                                       const std::map<std::string, std::string>& overrides,
                                       const std::string& install_root) {
  json d;
  const std::string fam = platform_family(in.platform);
  d["platform"] = fam;
  d["rocm"] = fam == "rocm";
  d["cpu"] = fam == "cpu";
  d["kernel_code"] = code_block(in.kernel_code);
  d["problem_code"] = code_block(in.problem_code);
  d["gpu_name"] = in.gpu_name;
  d["gpu"] = gpu_view(in.gpu_name);
  d["eager_ms"] = positive(in.eager_ms) ? fixed(in.eager_ms, 4) : "";
  d["current_best_ms"] = positive(in.current_best_ms) ? fixed(in.current_best_ms, 4) : "";
  d["roofline"] = roofline_view(in.roofline);
  d["bottleneck"] = bottleneck_view(in.bottleneck);

  json attempts = json::array();
  size_t i = 0;
  for (const auto& a : last_n(in.attempts, 5))
    if (a.is_object()) attempts.push_back(attempt_view(a, ++i));
  d["attempts"] = attempts;
  d["has_attempts"] = !attempts.empty();

  json reflexions = json::array();
  std::vector<std::string> avoid, prefer;
  std::set<std::string> seen_avoid, seen_prefer;
  i = 0;
  for (const auto& r : last_n(in.reflexions, 5)) {
    if (!r.is_object()) continue;
    reflexions.push_back(reflexion_view(r, ++i));
    for (auto& p : string_list(r, "avoid_patterns"))
      if (seen_avoid.insert(p).second) avoid.push_back(p);
    for (auto& p : string_list(r, "try_patterns"))
      if (seen_prefer.insert(p).second) prefer.push_back(p);
  }
  d["reflexions"] = reflexions;
  d["has_reflexions"] = !reflexions.empty();
  d["avoid_patterns"] = avoid;
  d["try_patterns"] = prefer;
  d["has_avoid_patterns"] = !avoid.empty();
  d["has_try_patterns"] = !prefer.empty();
  d["error_feedback"] = trim(in.error_feedback);

  // PERFORMANCE TARGET (SPEC §8.1 item 11, §14 B.106): 10% under the best time, else under eager;
  // without either there is no number to beat.
  d["target"] = nullptr;
  if (positive(in.current_best_ms))
    d["target"] = {{"target_ms", fixed(in.current_best_ms * 0.9, 4)},
                   {"basis", "the best kernel so far"},
                   {"basis_ms", fixed(in.current_best_ms, 4)}};
  else if (positive(in.eager_ms))
    d["target"] = {{"target_ms", fixed(in.eager_ms * 0.9, 4)},
                   {"basis", "PyTorch eager"},
                   {"basis_ms", fixed(in.eager_ms, 4)}};

  d["platform_guidance"] = platform_guidance(in.platform, overrides, install_root);
  return render_prompt("kernel_optimization", d, overrides, install_root);
}

std::string render_refinement_prompt(const refinement_prompt_input& in,
                                     const std::map<std::string, std::string>& overrides,
                                     const std::string& install_root) {
  json d;
  const std::string fam = platform_family(in.platform);
  d["platform"] = fam;
  d["rocm"] = fam == "rocm";
  d["cpu"] = fam == "cpu";
  json g{{"platform", fam}, {"rocm", fam == "rocm"}, {"cpu", fam == "cpu"}, {"cuda", fam == "cuda"}, {"xpu", fam == "xpu"}};
  d["triton_guidelines"] = trim(render_prompt("triton_guidelines", g, overrides, install_root));
  d["platform_guidance"] = platform_guidance(in.platform, overrides, install_root);
  d["test_code"] = code_block(in.test_code);
  d["kernel_code"] = code_block(in.kernel_code);
  d["error_type"] = in.error_type.empty() ? classify_error_type(in.stderr_text, in.stdout_text) : in.error_type;
  d["error"] = trim(in.error_message);
  d["stderr"] = trim(tail_text(in.stderr_text, 2000));
  d["stdout"] = trim(tail_text(in.stdout_text, 1000));
  d["no_output"] = trim(in.stderr_text).empty() && trim(in.stdout_text).empty() && trim(in.error_message).empty();
  json drafts = json::array();
  size_t i = 0;
  for (const auto& h : last_n(in.history, 8)) {
    if (!h.is_object()) continue;
    drafts.push_back({{"index", std::to_string(++i)},
                      {"kernel_head", code_block(head_text(string_at(h, "kernel_code"), 500))},
                      {"stderr", trim(tail_text(string_at(h, "stderr"), 2000))},
                      {"stdout", trim(tail_text(string_at(h, "stdout"), 1000))}});
  }
  d["failed_drafts"] = drafts;
  d["has_failed_drafts"] = !drafts.empty();
  return render_prompt("kernel_refinement", d, overrides, install_root);
}

} // namespace kagent
