#pragma once
// The environment as a value. Platform code takes an env_map instead of reading getenv(), so that
// detection and pinning are pure functions, and so that the manager never mutates its own
// environment (SPEC §14 A.70): children receive a modified copy.
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kagent {

using env_map = std::map<std::string, std::string>;

/// A snapshot of this process's environment.
env_map current_environment();

/// The value of `name`, or nullopt when unset (an empty value is returned as "").
std::optional<std::string> env_get(const env_map& env, const std::string& name);

/// Glob match with '*' and '?', as used by the secret-scrubbing patterns (`*_API_KEY`).
bool glob_match(const std::string& pattern, const std::string& text);

/// A copy of `env` without every variable whose name matches one of `patterns`.
env_map scrub_env(const env_map& env, const std::vector<std::string>& patterns);

/// The default patterns that never reach a child: API keys, tokens and secrets.
const std::vector<std::string>& default_secret_patterns();

/// Removes every variable whose name matches one of `patterns` (or equals one of `names`) from this
/// process's environment, and keeps it only in memory: its value is registered with the redactor
/// (platform/common/redact.hpp), remembered for scrubbed_secrets(), unset, and its bytes are zeroed
/// in place both where environ pointed and in the original block that /proc/self/environ shows (which
/// unsetenv alone leaves intact). Returns the names removed. Not thread-safe (it edits environ): call
/// it before any thread starts, or while no other thread reads the environment.
std::vector<std::string> scrub_own_environment(const std::vector<std::string>& patterns,
                                               const std::vector<std::string>& names = {});

/// The variables scrub_own_environment removed, with their values: what the LLM key lookup reads.
env_map scrubbed_secrets();

/// Searches `path_var` (colon-separated) for an executable `name`; empty when not found.
std::string find_on_path(const std::string& name, const std::string& path_var);

} // namespace kagent

namespace kagent {
/// The directory holding configs/, templates/, harness/ and examples/: $KAGENT_HOME if set, else the
/// first ancestor of the running executable that has configs/noop.yaml (a build tree inside the
/// checkout, or a carried copy) or share/kagent-actors/configs/noop.yaml (an installed tree: that
/// share directory), else the source directory compiled in.
std::string install_root();
} // namespace kagent
