#pragma once
// What `runs`, `show` and `report` know about a run directory, read without changing it: summary.json
// (absent for a killed run), program.db (read-only) and whether a live process holds the run lock.
// Every piece may be missing or corrupt; what could not be read is noted in `problems`, never thrown.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "platform/store/program_db.hpp"

namespace kagent::app {

/// Whether the run lock of `run_dir` (<run>/.lock, an flock) is held by a live process. A
/// non-blocking shared probe: it never waits, never creates the file and never disturbs a holder.
/// `pid` is the holder's pid as it wrote it, when known.
struct lock_probe {
  bool held = false;
  bool known = true;  ///< false: .lock exists but cannot be opened (another user's run): held is a guess
  std::string pid;
};
lock_probe probe_run_lock(const std::filesystem::path& run_dir);

struct run_info {
  std::filesystem::path path;
  std::string id;                      ///< the directory's name
  std::optional<nlohmann::json> summary;  ///< summary.json when it parses as an object
  bool have_db = false;
  std::string db_status;               ///< run_state status ("" when unknown)
  std::map<std::string, std::string> state;  ///< run_state (without per-program keys)
  lock_probe lock;
  /// What to show: db_status, except "running" without a lock holder is "stopped" (killed);
  /// without a database: from summary.json's success, else "unknown".
  std::string status;
  std::string strategy;                ///< "" when unknown
  std::string search;
  std::string kernel_dir;
  std::optional<double> best_ms, initial_ms, eager_ms, compile_ms;
  std::string best_program_id;
  std::optional<std::int64_t> candidates, verified, failed, pending;
  std::map<std::string, std::int64_t> failures_by_cause;
  std::vector<store::program_record> top;    ///< fastest verified programs (up to 5)
  std::vector<store::llm_usage_row> llm_usage;
  std::string started;                 ///< "YYYY-MM-DD HH:MM:SS" UTC ("" when unknown)
  std::vector<std::string> problems;   ///< one line per piece that could not be read
};

/// True when `dir` looks like a run directory (config.yaml, program.db or summary.json in it).
bool looks_like_run_dir(const std::filesystem::path& dir);

/// Reads everything above; never throws for missing or corrupt files.
run_info read_run_info(const std::filesystem::path& run_dir);

/// `initial / best` when both are known and positive.
std::optional<double> speedup(const std::optional<double>& base, const std::optional<double>& t);

/// RUN as a path to a run directory, else a run id (or a unique prefix of one) under `base`.
/// Throws user_error with one line saying what was looked for.
std::filesystem::path resolve_run(const std::string& run, const std::string& base);

/// Milliseconds for humans: "62.98 ms" (4 significant digits), "-" when unknown.
std::string fmt_ms(const std::optional<double>& ms);
/// "2.05x", "-" when unknown.
std::string fmt_x(const std::optional<double>& x);

} // namespace kagent::app
