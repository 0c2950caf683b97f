#pragma once
// Prompt rendering: mustache templates from templates/ (or the YAML's overrides), filled from JSON.
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace kagent {

/// Renders `templates/<name>.mustache` (or overrides[name]) with `data`. Throws user_error when an
/// override file is missing, run_error when a built-in one is.
std::string render_prompt(const std::string& name, const nlohmann::json& data,
                          const std::map<std::string, std::string>& overrides, const std::string& install_root);

/// The platform kernel guidance block (SPEC §8.5, §14 A.42-A.46): the ROCm restrictions on rocm,
/// empty on CUDA.
std::string platform_guidance(const std::string& target_platform);

/// The last `n` bytes of `s`, prefixed with "..." when cut.
std::string tail_text(const std::string& s, size_t n);

} // namespace kagent
