#pragma once
// API keys come from the environment or from a `.env` file in the working directory; the environment
// wins, so a CI secret is never shadowed by a stale file.
#include <string>

#include "platform/common/env.hpp"

namespace kagent {

/// Parses .env text: KEY=VALUE lines, optional `export ` prefix, '#' comments (whole line, or after a
/// space in an unquoted value), single quotes (literal) and double quotes (\n, \", \\ escapes).
/// Malformed lines are skipped (a .env file is not ours to reject).
env_map parse_dotenv(const std::string& text);

/// The variables of the file at `path`; empty when it does not exist.
env_map load_dotenv(const std::string& path);

/// `env` plus every variable of `dotenv` that `env` does not already define.
env_map merge_env(env_map env, const env_map& dotenv);

/// The value of an API-key variable, or "" when unset, empty, or the placeholder `your-api-key-here`.
std::string api_key_from(const env_map& env, const std::string& var);

} // namespace kagent
