#include "platform/analysis/bottleneck.hpp"

#include <algorithm>
#include <cctype>
#include <optional>

#include "platform/prompt/format.hpp"
#include "platform/prompt/prompt.hpp"
#include "platform/common/text.hpp"

namespace kagent {

namespace {

using nlohmann::json;

/// A JSON scalar as text: strings as they are, numbers as written, booleans, null -> "".
std::string scalar_text(const json& j) {
  if (j.is_string()) return trim(j.get<std::string>());
  if (j.is_number() || j.is_boolean()) return j.dump();
  return "";
}

std::string field(const json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it == j.end() ? "" : scalar_text(*it);
}

std::optional<fix_item> read_fix(const json& f) {
  fix_item x;
  if (f.is_string()) {
    x.fix = trim(f.get<std::string>());
  } else if (f.is_object()) {
    x.fix = field(f, "fix");
    x.rationale = field(f, "rationale");
  }
  if (x.fix.empty()) return std::nullopt;
  return x;
}

std::vector<fix_item> read_fixes(const json& j) {
  std::vector<fix_item> out;
  if (j.is_array()) {
    for (const auto& f : j)
      if (auto x = read_fix(f)) out.push_back(*x);
  } else if (auto x = read_fix(j)) {
    out.push_back(*x);
  }
  return out;
}

std::optional<evidence_item> read_evidence(const json& e) {
  evidence_item x;
  if (e.is_string()) {
    x.interpretation = trim(e.get<std::string>());
  } else if (e.is_object()) {
    x.metric = field(e, "metric");
    x.value = field(e, "value");
    x.interpretation = field(e, "interpretation");
  }
  if (x.metric.empty() && x.value.empty() && x.interpretation.empty()) return std::nullopt;
  return x;
}

root_cause read_cause(const json& c) {
  root_cause r;
  if (c.is_string()) {
    r.cause = trim(c.get<std::string>());
  } else if (c.is_object()) {
    r.cause = field(c, "cause");
    if (auto it = c.find("evidence"); it != c.end()) {
      if (it->is_array()) {
        for (const auto& e : *it)
          if (auto x = read_evidence(e)) r.evidence.push_back(*x);
      } else if (auto x = read_evidence(*it)) {
        r.evidence.push_back(*x);
      }
    }
    if (auto it = c.find("fixes"); it != c.end()) r.fixes = read_fixes(*it);
  }
  if (r.cause.empty()) r.cause = "Unknown";
  return r;
}

/// One element of the reply, normalised (SPEC §7.3). `keep_recommended`: take a stored
/// recommended_fixes list as it is (bottleneck_from_json) instead of rebuilding it.
bottleneck read_bottleneck(const json& j, bool keep_recommended) {
  bottleneck b;
  b.category = coerce_category(field(j, "category"));
  b.summary = field(j, "summary");
  if (b.summary.empty()) b.summary = b.category + "-bound";
  b.reasoning = field(j, "reasoning");
  if (j.is_object()) {
    if (auto it = j.find("root_causes"); it != j.end()) {
      if (it->is_array()) {
        for (const auto& c : *it) b.root_causes.push_back(read_cause(c));
      } else if (it->is_object() || it->is_string()) {
        b.root_causes.push_back(read_cause(*it));
      }
    }
  }
  std::vector<fix_item> legacy;
  if (j.is_object())
    if (auto it = j.find("recommended_fixes"); it != j.end()) legacy = read_fixes(*it);
  if (keep_recommended && j.is_object() && j.contains("recommended_fixes")) {
    b.recommended_fixes = legacy;
    return b;
  }
  for (const auto& c : b.root_causes)
    for (const auto& f : c.fixes) b.recommended_fixes.push_back(f);
  for (const auto& f : legacy) {
    bool present = std::any_of(b.recommended_fixes.begin(), b.recommended_fixes.end(),
                               [&](const fix_item& g) { return g.fix == f.fix; });
    if (!present) b.recommended_fixes.push_back(f);
  }
  return b;
}

std::optional<json> parse_span(const std::string& text, char open, char close) {
  const auto a = text.find(open);
  const auto z = text.rfind(close);
  if (a == std::string::npos || z == std::string::npos || z <= a) return std::nullopt;
  json j = json::parse(text.substr(a, z - a + 1), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

/// The bottleneck objects a parsed value holds: an array's objects, one object, or the array under
/// a wrapper key of an object.
std::vector<json> elements_of(const json& j) {
  std::vector<json> out;
  if (j.is_array()) {
    for (const auto& e : j)
      if (e.is_object()) out.push_back(e);
  } else if (j.is_object()) {
    for (const char* key : {"bottlenecks", "directions"})
      if (auto it = j.find(key); it != j.end() && it->is_array() && !j.contains("category")) return elements_of(*it);
    out.push_back(j);
  }
  return out;
}

json fix_json(const fix_item& f) { return {{"fix", f.fix}, {"rationale", f.rationale}}; }

} // namespace

bool is_bottleneck_category(const std::string& c) { return c == "memory" || c == "compute" || c == "underutilized"; }

std::string coerce_category(const std::string& c) {
  std::string s;
  for (char ch : trim(c)) s.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  return is_bottleneck_category(s) ? s : "underutilized";
}

json to_json(const bottleneck& b) {
  json causes = json::array();
  for (const auto& c : b.root_causes) {
    json ev = json::array();
    for (const auto& e : c.evidence)
      ev.push_back({{"metric", e.metric}, {"value", e.value}, {"interpretation", e.interpretation}});
    json fixes = json::array();
    for (const auto& f : c.fixes) fixes.push_back(fix_json(f));
    causes.push_back({{"cause", c.cause}, {"evidence", ev}, {"fixes", fixes}});
  }
  json rec = json::array();
  for (const auto& f : b.recommended_fixes) rec.push_back(fix_json(f));
  return {{"category", b.category},
          {"summary", b.summary},
          {"reasoning", b.reasoning},
          {"root_causes", causes},
          {"recommended_fixes", rec}};
}

bottleneck bottleneck_from_json(const json& j) { return read_bottleneck(j, true); }

json to_json(const kernel_analysis& a) {
  json bs = json::array();
  for (const auto& b : a.bottlenecks) bs.push_back(to_json(b));
  return {{"profile", a.profile ? json(*a.profile) : json(nullptr)}, {"bottlenecks", bs}, {"source", a.source}};
}

kernel_analysis analysis_from_json(const json& j) {
  kernel_analysis a;
  if (!j.is_object()) return a;
  if (j.contains("profile") && j.at("profile").is_object()) a.profile = j.at("profile").get<kernel_profile>();
  if (j.contains("bottlenecks") && j.at("bottlenecks").is_array())
    for (const auto& b : j.at("bottlenecks")) a.bottlenecks.push_back(bottleneck_from_json(b));
  a.source = j.value("source", std::string{"none"});
  return a;
}

std::vector<bottleneck> parse_bottleneck_reply(const std::string& text) {
  const auto first_bracket = text.find('[');
  const auto first_brace = text.find('{');
  const bool object_first =
      first_brace != std::string::npos && (first_bracket == std::string::npos || first_brace < first_bracket);
  std::vector<std::pair<char, char>> order = {{'[', ']'}, {'{', '}'}};
  if (object_first) std::swap(order[0], order[1]);
  for (auto [open, close] : order) {
    auto j = parse_span(text, open, close);
    if (!j) continue;
    auto elems = elements_of(*j);
    if (elems.empty()) continue;
    std::vector<bottleneck> out;
    for (const auto& e : elems) out.push_back(read_bottleneck(e, false));
    return out;
  }
  return {};
}

bottleneck synthetic_bottleneck(const std::string& override_category, const std::string& reason) {
  bottleneck b;
  b.category = coerce_category(override_category);
  const std::string why = trim(reason).empty() ? "the ROCm profiler returned no metrics" : trim(reason);
  b.summary = "Synthetic " + b.category + " diagnosis: ROCm profiling is unavailable, so no hardware counters back it.";
  b.reasoning = "Profiling is unavailable in this session (" + why +
                "). This diagnosis is synthetic: the category '" + b.category +
                "' is assumed, not measured, so only conservative, AMD-friendly tuning is suggested.";
  root_cause c;
  c.cause = "ROCm profiling unavailable";
  c.evidence.push_back({"rocprofv3", "unavailable", why});
  c.fixes.push_back({"Apply AMD-friendly tuning without counters: BLOCK sizes that are multiples of 64, a moderate "
                     "num_warps (4-8) and a small num_stages, keeping the algorithm and its fusion unchanged",
                     "With no counters to go by, only changes that are safe on any CDNA GPU are worth trying"});
  b.root_causes.push_back(c);
  b.recommended_fixes.push_back(
      {"Do not re-profile; tune BLOCK sizes, num_warps and num_stages conservatively for AMD execution "
       "(64-lane wavefronts)",
       "Profiling already failed in this session, so the next gains come from safe launch-parameter tuning"});
  return b;
}

} // namespace kagent
