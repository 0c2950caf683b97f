#pragma once
// Prompt rendering: mustache templates from templates/ (or the YAML's overrides), filled from JSON.
//
// Every prompt has one template, named by its logical name (the key of the YAML `templates:` map):
//   kernel_optimization, kernel_refinement, reflexion_prompt, bottleneck_analysis, triton_guidelines,
//   platform_guidance.
// The render_* functions below build the template's data from typed inputs (docs/prompts.md lists the
// variables of each template), so an override only changes the wording, never what is computed.
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace kagent {

/// Renders `templates/<name>.mustache` (or overrides[name]) with `data`. Throws user_error when an
/// override file is missing, run_error when a built-in one is. Empty strings and null count as false
/// in sections ({{#x}}...{{/x}} is skipped for x == ""); nothing is HTML-escaped.
std::string render_prompt(const std::string& name, const nlohmann::json& data,
                          const std::map<std::string, std::string>& overrides, const std::string& install_root);

/// The platform kernel guidance block (SPEC §8.5, §14 A.42-A.46), from templates/platform_guidance:
/// the ROCm restrictions on "rocm", a note on Triton's CPU interpreter on "cpu", empty on CUDA (and
/// on xpu/noop). Uses the built-in template under install_root().
std::string platform_guidance(const std::string& target_platform);
/// Same, with the YAML's template overrides and an explicit install root.
std::string platform_guidance(const std::string& target_platform, const std::map<std::string, std::string>& overrides,
                              const std::string& install_root);

/// The target platform the prompts are written for: the vendor that was chosen wins over the
/// config's `target_platform` (whose default is "cuda"), so that a run on AMD — detected, or named
/// with `platform: rocm` — puts the ROCm guidance and restrictions in every prompt, and one on NVIDIA
/// never gets them. `vendor` is the detected one ("" without a GPU), `verifier` the verifier
/// component's platform. GPU-less platforms (cpu, noop) keep the configured value.
std::string prompt_target_platform(const std::string& configured, const std::string& vendor, const std::string& verifier);

/// The last `n` bytes of `s`, prefixed with "..." when cut.
std::string tail_text(const std::string& s, size_t n);
/// The first `n` bytes of `s`, followed by "..." when cut.
std::string head_text(const std::string& s, size_t n);

/// SPEC §3.2: "compilation" when the chosen output (stderr if not blank, else stdout) mentions
/// CompilationError or SyntaxError, else "runtime".
std::string classify_error_type(const std::string& stderr_text, const std::string& stdout_text);

// ---------------------------------------------------------------------------------------------
// kernel_optimization (SPEC §8.1): the per-round rewrite request.

struct optimization_prompt_input {
  std::string kernel_code;
  std::string platform;       ///< target platform: cuda | rocm | cpu | xpu (also nvidia, noop)
  std::string gpu_name;       ///< spec row key; "" or unknown: no TARGET GPU section
  std::string problem_code;   ///< the PyTorch reference (problem.py); "" leaves the section out
  double eager_ms = -1;       ///< < 0 (or not finite): unknown
  double current_best_ms = -1;
  nlohmann::json roofline;    ///< roofline_result as JSON, or null
  nlohmann::json bottleneck;  ///< to_json(bottleneck) of the direction to work on, or null
  nlohmann::json attempts;    ///< array of SPEC §2.7 attempt dicts, newest last (the last 5 are shown)
  nlohmann::json reflexions;  ///< array of SPEC §2.7 reflexion dicts, newest last (the last 5 are shown)
  std::string error_feedback; ///< why the previous attempt failed, or ""
};

/// Renders the kernel_optimization template (variables: docs/prompts.md).
std::string render_optimization_prompt(const optimization_prompt_input& in,
                                       const std::map<std::string, std::string>& overrides,
                                       const std::string& install_root);

// ---------------------------------------------------------------------------------------------
// kernel_refinement (SPEC §8.2, §3.2): fixing a kernel that failed its test.

struct refinement_prompt_input {
  std::string kernel_code;
  std::string platform;       ///< target platform, as above
  std::string test_code;      ///< the test file(s); "" leaves the section out
  std::string error_type;     ///< "compilation" | "runtime"; "" = classify_error_type(stderr, stdout)
  std::string stderr_text;    ///< shown up to its last 2000 characters
  std::string stdout_text;    ///< shown up to its last 1000 characters
  /// Earlier failed drafts of this candidate, newest last: objects {kernel_code, stderr, stdout}.
  /// The last 8 are shown (first 500 characters of each kernel, stderr <= 2000, stdout <= 1000).
  nlohmann::json history;
  std::string error_message;  ///< the one-line verdict (e.g. the ban-check reason); "" if none
};

/// Renders the kernel_refinement template, with triton_guidelines and platform_guidance inside.
std::string render_refinement_prompt(const refinement_prompt_input& in,
                                     const std::map<std::string, std::string>& overrides,
                                     const std::string& install_root);

} // namespace kagent
