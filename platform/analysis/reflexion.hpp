#pragma once
// Reflexion (SPEC §8.4, §2.7): after a benchmarked attempt, the LLM judges its own diagnosis; the
// verdicts feed the next optimization prompts.
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace kagent {

/// The parameters of the first triton.Config(...) in each file (its dict or kwargs={...}, plus
/// num_warps=, num_stages=, ...), compared: {key: "old→new"} for each key whose value differs; a
/// key only one side has reads "unset" on the other. {} when neither file has a triton.Config.
nlohmann::json config_changes(const std::string& old_code, const std::string& new_code);

/// Renders the reflexion_prompt template from a SPEC §2.7 attempt dict (variables: docs/prompts.md).
std::string render_reflexion_prompt(const nlohmann::json& attempt, const std::map<std::string, std::string>& overrides,
                                    const std::string& install_root);

/// The reflexion dict of SPEC §2.7 (exactly its keys: round_num, root_cause_diagnosed, fix_applied,
/// expected_outcome, actual_outcome, performance_delta_pct, was_diagnosis_correct, was_fix_effective,
/// reasoning, lessons[], avoid_patterns[], try_patterns[]). The reply's first '{'..last '}' span is
/// read; round_num, root_cause_diagnosed, fix_applied and performance_delta_pct (null when unknown)
/// come from the attempt. Without a usable object (or for fields it lacks): actual_outcome
/// "Improved" / "No improvement" and both flags = the attempt's is_improvement (SPEC §8.4).
nlohmann::json parse_reflexion_reply(const std::string& text, const nlohmann::json& attempt);

} // namespace kagent
