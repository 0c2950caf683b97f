#pragma once
// Profiles kept across runs (issue 14, "cache what repeats"; README "Caches"). A kernel's profile is a
// function of what was profiled and how: its code, the problem, the dtype and size, the GPU model, the
// profiler (its platform, binary and that binary's size and time), the metrics asked and, on ROCm,
// the MFMA pass. The cache keys a profile by the sha256 of all of those, so a run of a kernel
// directory profiled before (its starting kernel's baseline, a kernel the LLM wrote again) takes
// the profile from disk instead of a 10 s profiler process. Only successful profiles are kept; the
// roofline verdict is derived again from the cached metrics with the run's own settings.
//   <root>/profiles/<key>.json   {"version", "key_parts", "kernel_name", "metrics", "detail", "stored_at"}
#include <filesystem>
#include <optional>
#include <string>

#include "platform/common/env.hpp"
#include "platform/profiling/profile_runner.hpp"

namespace kagent {

/// Where caches live: $KAGENT_CACHE_DIR, else $XDG_CACHE_HOME/kagent-actors, else
/// $HOME/.cache/kagent-actors; "" (no cache) when KAGENT_CACHE_DIR is "off" or no HOME is known.
std::filesystem::path default_cache_root(const env_map& env);

/// The request's cache key, or "" when it cannot be cached (no profiler binary found, an unreadable
/// problem file).
std::string profile_cache_key(const kernel_profile_request& req);

/// The cached profile for `key` as an outcome (ok, kernel_name, metrics, detail with "cached": key,
/// a note naming the cache file; no records), or nullopt on a miss or an unreadable entry.
std::optional<kernel_profile_outcome> load_cached_profile(const std::filesystem::path& root, const std::string& key);

/// Keeps a successful profile under `key` (written atomically; failures to write are ignored: the
/// cache is a convenience).
void store_cached_profile(const std::filesystem::path& root, const std::string& key, const kernel_profile_outcome& o);

} // namespace kagent
