#pragma once
// Small file and time helpers shared by the run directory, the event log and the program DB.
// Every file the store writes (except the append-only events.jsonl) goes through
// write_file_atomic, so that a reader or a crash never sees half a file.
#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>

namespace kagent::store {

/// `tp` as ISO-8601 UTC with milliseconds: "2026-12-02T12:15:30.123Z".
std::string iso_utc(std::chrono::system_clock::time_point tp);
/// iso_utc(now).
std::string iso_utc_now();

/// Writes `text` to `path` through a temporary file in the same directory, fsync and rename, so
/// `path` holds either its old content or all of `text`. The temporary is removed on failure.
/// Throws run_error naming the path.
void write_file_atomic(const std::filesystem::path& path, std::string_view text);


/// Lower-case hex SHA-256 of `text`; equal to `sha256sum` of a file holding exactly `text`,
/// so users can match a kernel file against programs.code_hash.
std::string sha256_hex(std::string_view text);

/// True when `name` is a safe single path component for the store: non-empty, at most 128
/// characters of [A-Za-z0-9._-], not "." or "..". Candidate ids and artifact names must pass.
bool is_safe_name(std::string_view name);

} // namespace kagent::store
