#include "platform/analysis/reflexion.hpp"

#include <cctype>
#include <cmath>
#include <optional>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "platform/prompt/format.hpp"
#include "platform/prompt/prompt.hpp"
#include "platform/common/text.hpp"

namespace kagent {

namespace {

using nlohmann::json;
using namespace promptfmt;

const char* const k_arrow = "\xe2\x86\x92";  // →

std::string squeeze(const std::string& s) {
  std::string out;
  bool space = false;
  for (char c : trim(s)) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = true;
      continue;
    }
    if (space && !out.empty()) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

std::string unquote(const std::string& s) {
  std::string t = trim(s);
  if (t.size() >= 2 && (t.front() == '\'' || t.front() == '"') && t.back() == t.front()) return t.substr(1, t.size() - 2);
  return t;
}

/// Index of the bracket closing the one at `open_pos`, skipping string literals; npos if unbalanced.
size_t matching_close(const std::string& s, size_t open_pos) {
  int depth = 0;
  char quote = 0;
  for (size_t i = open_pos; i < s.size(); ++i) {
    char c = s[i];
    if (quote) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
      continue;
    }
    if (c == '\'' || c == '"') quote = c;
    else if (c == '(' || c == '[' || c == '{') ++depth;
    else if (c == ')' || c == ']' || c == '}') {
      if (--depth == 0) return i;
    } else if (c == '#') {
      while (i < s.size() && s[i] != '\n') ++i;  // a comment inside the call
    }
  }
  return std::string::npos;
}

/// Splits at commas outside brackets and strings.
std::vector<std::string> split_top(const std::string& s) {
  std::vector<std::string> out;
  int depth = 0;
  char quote = 0;
  std::string cur;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quote) {
      cur.push_back(c);
      if (c == '\\' && i + 1 < s.size()) cur.push_back(s[++i]);
      else if (c == quote) quote = 0;
      continue;
    }
    if (c == '#') {
      while (i < s.size() && s[i] != '\n') ++i;
      continue;
    }
    if (c == '\'' || c == '"') quote = c;
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    if (c == ',' && depth == 0) {
      if (!trim(cur).empty()) out.push_back(trim(cur));
      cur.clear();
      continue;
    }
    cur.push_back(c);
  }
  if (!trim(cur).empty()) out.push_back(trim(cur));
  return out;
}

void read_dict(const std::string& dict_text, std::map<std::string, std::string>& out) {
  // dict_text includes its braces.
  for (const auto& entry : split_top(dict_text.substr(1, dict_text.size() - 2))) {
    // The first ':' outside strings separates key and value.
    char quote = 0;
    size_t colon = std::string::npos;
    for (size_t i = 0; i < entry.size(); ++i) {
      char c = entry[i];
      if (quote) {
        if (c == quote) quote = 0;
        continue;
      }
      if (c == '\'' || c == '"') quote = c;
      else if (c == ':') {
        colon = i;
        break;
      }
    }
    if (colon == std::string::npos) continue;
    out[unquote(entry.substr(0, colon))] = squeeze(entry.substr(colon + 1));
  }
}

/// The parameters of the first triton.Config( call outside comments; nullopt when there is none.
std::optional<std::map<std::string, std::string>> first_config(const std::string& code) {
  const std::string needle = "triton.Config(";
  for (size_t pos = code.find(needle); pos != std::string::npos; pos = code.find(needle, pos + 1)) {
    const size_t line_start = code.rfind('\n', pos) == std::string::npos ? 0 : code.rfind('\n', pos) + 1;
    if (code.substr(line_start, pos - line_start).find('#') != std::string::npos) continue;
    const size_t open = pos + needle.size() - 1;
    const size_t close = matching_close(code, open);
    if (close == std::string::npos) return std::nullopt;
    std::map<std::string, std::string> params;
    for (const auto& arg : split_top(code.substr(open + 1, close - open - 1))) {
      if (arg.front() == '{') {
        read_dict(arg, params);
        continue;
      }
      const auto eq = arg.find('=');
      if (eq == std::string::npos) continue;
      const std::string name = trim(arg.substr(0, eq));
      const std::string value = trim(arg.substr(eq + 1));
      if (name == "kwargs" && !value.empty() && value.front() == '{') {
        read_dict(value, params);
      } else if (name != "pre_hook") {
        params[name] = squeeze(value);
      }
    }
    return params;
  }
  return std::nullopt;
}

std::string ms_text(const std::optional<double>& v) {
  return v && *v > 0 ? fixed(*v, 4) + " ms" : std::string("not measured");
}

std::optional<double> improvement_of(const json& a) {
  if (auto v = number_at(a, "improvement_pct")) return v;
  auto before = number_at(a, "time_before_ms"), after = number_at(a, "time_after_ms");
  if (before && after && *before > 0 && *after > 0) return 100.0 * (*before - *after) / *before;
  return std::nullopt;
}

bool attempt_improved(const json& a) {
  const auto imp = improvement_of(a);
  return bool_at(a, "is_improvement", bool_at(a, "passed_verification", true) && imp && *imp > 0);
}

std::string text_or_field(const json& j, const char* key, const char* inner) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  if (it == j.end()) return "";
  if (it->is_object()) return string_at(*it, inner);
  return string_at(j, key);
}

std::optional<bool> loose_bool(const json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  if (it->is_boolean()) return it->get<bool>();
  if (it->is_string()) {
    std::string s;
    for (char c : trim(it->get<std::string>())) s.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    if (s == "true" || s == "yes" || s == "correct" || s == "effective") return true;
    if (s == "false" || s == "no" || s == "incorrect" || s == "ineffective") return false;
  }
  return std::nullopt;
}

json loose_list(const json& j, const char* key) {
  json out = json::array();
  if (!j.is_object()) return out;
  auto it = j.find(key);
  if (it == j.end()) return out;
  auto add = [&](const json& e) {
    std::string s = e.is_string() ? trim(e.get<std::string>()) : (e.is_number() || e.is_boolean()) ? e.dump() : "";
    if (!s.empty()) out.push_back(s);
  };
  if (it->is_array()) {
    for (const auto& e : *it) add(e);
  } else {
    add(*it);
  }
  return out;
}

} // namespace

json config_changes(const std::string& old_code, const std::string& new_code) {
  json out = json::object();
  auto a = first_config(old_code);
  auto b = first_config(new_code);
  if (!a && !b) return out;
  std::map<std::string, std::string> before = a.value_or(std::map<std::string, std::string>{});
  std::map<std::string, std::string> after = b.value_or(std::map<std::string, std::string>{});
  std::set<std::string> keys;
  for (const auto& [k, v] : before) keys.insert(k);
  for (const auto& [k, v] : after) keys.insert(k);
  for (const auto& k : keys) {
    auto x = before.find(k), y = after.find(k);
    const std::string ov = x == before.end() ? "unset" : x->second;
    const std::string nv = y == after.end() ? "unset" : y->second;
    if (ov != nv) out[k] = ov + k_arrow + nv;
  }
  return out;
}

std::string render_reflexion_prompt(const json& attempt, const std::map<std::string, std::string>& overrides,
                                    const std::string& install_root) {
  json d;
  const std::string round = string_at(attempt, "round_num");
  d["round"] = round.empty() ? "?" : round;
  std::string cat = string_at(attempt, "bottleneck_category");
  d["bottleneck_category"] = cat.empty() ? "unknown" : cat;
  std::string cause = text_or_field(attempt, "root_cause", "cause");
  d["root_cause"] = cause.empty() ? "not recorded" : cause;
  std::string fix = text_or_field(attempt, "recommended_fix", "fix");
  d["fix"] = fix.empty() ? "not recorded" : fix;
  std::string changes;
  if (auto it = attempt.is_object() ? attempt.find("config_changes") : attempt.end();
      attempt.is_object() && it != attempt.end() && it->is_object())
    for (auto c = it->begin(); c != it->end(); ++c)
      changes += (changes.empty() ? "" : ", ") + c.key() + ": " + (c->is_string() ? c->get<std::string>() : c->dump());
  d["config_changes"] = changes.empty() ? "none" : changes;
  const bool passed = bool_at(attempt, "passed_verification", true);
  d["passed"] = passed ? "yes" : "no";
  d["time_before"] = ms_text(number_at(attempt, "time_before_ms"));
  d["time_after"] = ms_text(number_at(attempt, "time_after_ms"));
  d["improvement"] = "";
  if (auto imp = improvement_of(attempt))
    d["improvement"] = fmt::format("{:+.2f}% improvement", *imp);
  auto sol = [&](const char* key) {
    auto v = number_at(attempt, key);
    return v && *v >= 0 ? fixed(*v, 1) + "%" : std::string("not measured");
  };
  d["compute_sol"] = sol("compute_sol_pct");
  d["memory_sol"] = sol("memory_sol_pct");
  d["error"] = "";
  if (!passed) {
    std::string err = string_at(attempt, "error_message");
    d["error"] = err.empty() ? "(no error message recorded)" : head_text(err, 200);
  }
  return render_prompt("reflexion_prompt", d, overrides, install_root);
}

json parse_reflexion_reply(const std::string& text, const json& attempt) {
  json reply;  // null unless the reply holds an object
  const auto a = text.find('{');
  const auto z = text.rfind('}');
  if (a != std::string::npos && z != std::string::npos && z > a) {
    json j = json::parse(text.substr(a, z - a + 1), nullptr, false);
    if (!j.is_discarded() && j.is_object()) reply = j;
  }
  const bool improved = attempt_improved(attempt);
  json r;
  if (auto n = number_at(attempt, "round_num")) r["round_num"] = static_cast<long long>(std::llround(*n));
  else r["round_num"] = nullptr;
  r["root_cause_diagnosed"] = text_or_field(attempt, "root_cause", "cause");
  r["fix_applied"] = text_or_field(attempt, "recommended_fix", "fix");
  r["expected_outcome"] = string_at(reply, "expected_outcome");
  std::string actual = string_at(reply, "actual_outcome");
  r["actual_outcome"] = actual.empty() ? (improved ? "Improved" : "No improvement") : actual;
  if (auto imp = improvement_of(attempt)) r["performance_delta_pct"] = *imp;
  else r["performance_delta_pct"] = nullptr;
  r["was_diagnosis_correct"] = loose_bool(reply, "was_diagnosis_correct").value_or(improved);
  r["was_fix_effective"] = loose_bool(reply, "was_fix_effective").value_or(improved);
  r["reasoning"] = string_at(reply, "reasoning");
  r["lessons"] = loose_list(reply, "lessons");
  r["avoid_patterns"] = loose_list(reply, "avoid_patterns");
  r["try_patterns"] = loose_list(reply, "try_patterns");
  return r;
}

} // namespace kagent
