#pragma once
// Bottleneck analysis (SPEC §7): the prompt that asks the LLM for N directions, the parser of its
// reply, and the one synthetic diagnosis used when ROCm profiling is unavailable.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "platform/profile_core/kernel_profile.hpp"

namespace kagent {

struct evidence_item {
  std::string metric, value, interpretation;
};
struct fix_item {
  std::string fix, rationale;
};
struct root_cause {
  std::string cause;
  std::vector<evidence_item> evidence;
  std::vector<fix_item> fixes;
};
struct bottleneck {
  std::string category;  ///< memory | compute | underutilized
  std::string summary;
  std::string reasoning;
  std::vector<root_cause> root_causes;
  std::vector<fix_item> recommended_fixes;  ///< the prompt uses root_causes[0] and recommended_fixes[0]
};

/// {category, summary, reasoning, root_causes: [{cause, evidence: [{metric, value, interpretation}],
/// fixes: [{fix, rationale}]}], recommended_fixes: [{fix, rationale}]}
nlohmann::json to_json(const bottleneck& b);
/// Reads to_json's shape leniently (the normalisation of SPEC §7.3; a stored recommended_fixes list
/// is kept as it is). A non-object gives the default direction (underutilized).
bottleneck bottleneck_from_json(const nlohmann::json& j);

/// A parent's analysis, shared by every candidate that expands it: the profile it was made from (when
/// one was taken, or the parent's own SOL profile), the directions in order, and where they came from.
struct kernel_analysis {
  std::optional<kernel_profile> profile;
  std::vector<bottleneck> bottlenecks;
  std::string source = "none";  ///< llm | synthetic | synthetic+llm | none
};
/// {"profile": {...} | null, "bottlenecks": [...], "source": "..."} (analysis.json, run_state).
nlohmann::json to_json(const kernel_analysis& a);
/// Reads to_json's shape; a non-object gives an empty analysis (source "none").
kernel_analysis analysis_from_json(const nlohmann::json& j);

/// The three categories (SPEC §7.1).
bool is_bottleneck_category(const std::string& c);
/// Trimmed, lower-cased `c` when it is a category, else "underutilized" (SPEC §7.1).
std::string coerce_category(const std::string& c);

/// SPEC §7.3. The reply's first '['..last ']' span as a JSON array, else its first '{'..last '}'
/// span as one object (a lone object is tried first when its '{' comes before any '['; an object
/// {"bottlenecks": [...]} is unwrapped), else []. Per element: category coerced; root causes
/// normalised to {cause (default "Unknown"), evidence, fixes}; recommended_fixes = every cause's
/// fixes, then any top-level recommended_fixes not already there; summary defaults to
/// "<category>-bound", reasoning to "". Elements that are not objects are dropped.
std::vector<bottleneck> parse_bottleneck_reply(const std::string& text);

/// The ONE synthetic diagnosis (SPEC §7.4, §14 A.26): category = override_category when it is a
/// category, else underutilized; summary and reasoning say profiling is unavailable (`reason`) and the
/// diagnosis is synthetic; one root cause "ROCm profiling unavailable" with one conservative fix;
/// recommended_fixes[0] says not to re-profile and to tune BLOCK sizes, num_warps and num_stages
/// conservatively for AMD.
bottleneck synthetic_bottleneck(const std::string& override_category, const std::string& reason);

struct bottleneck_prompt_input {
  std::string kernel_code;
  std::string platform;        ///< "rocm" | "nvidia" | "cpu" | "noop" (also "cuda")
  std::string gpu_name;        ///< specs row ("" / unknown: no specs section)
  nlohmann::json metrics;      ///< flat metrics object, or null when no profile is available
  nlohmann::json roofline;     ///< roofline verdict object, or null
  int num_bottlenecks = 1, num_causes = 2, num_fixes = 1;
};

/// Renders the bottleneck_analysis template (SPEC §7.2; variables: docs/prompts.md). Metrics are
/// grouped by section (metric_sections below). Throws run_error when `metrics` is nested (a map
/// keyed by kernel name, SPEC §14 B.84) instead of flat.
std::string render_bottleneck_prompt(const bottleneck_prompt_input& in,
                                     const std::map<std::string, std::string>& overrides,
                                     const std::string& install_root);

/// The metrics as template sections: [{title, note, lines: ["label: value unit", ...]}], known
/// metrics in schema order, the rest under "Other Metrics" by their own names. `cdna` selects the
/// ROCm schema, which labels instruction-mix shares as instruction mix (never as SOL, SPEC §14
/// A.33-A.34). '_'-prefixed keys, device__attribute_* keys, nulls and non-finite numbers are left
/// out; {"ncu_metrics": {...}} / {"rocm_metrics": {...}} is unwrapped; any other nested value is a
/// run_error. Values are shown to 3 significant digits.
nlohmann::json metric_sections(const nlohmann::json& metrics, bool cdna);

} // namespace kagent
