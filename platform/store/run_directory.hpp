#pragma once
// The run directory: everything one optimization run leaves behind, under <run-dir>/<run_id>/
//   config.yaml            the resolved configuration (text given by the caller)
//   events.jsonl           one JSON event per line (event_log)
//   program.db             SQLite program database, WAL mode (program_db)
//   candidates/<id>/       per-candidate artifacts: kernel.py, prompts, replies, logs
//   output/best_kernel.py  the best verified kernel
//   summary.json           the final summary
//   report.html            written by the reporter
// A run id is "<UTC yyyymmdd-HHMMSS>-<hint>-<4 hex>": sortable by start time, and never reused
// because creation refuses a directory that already exists (SPEC §14 B.108: each run has its own DB).
#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kagent::store {

class run_directory {
public:
  /// Default parent of all run directories.
  static constexpr const char* default_base = ".optimize";

  /// Creates <base>/<run_id>/ with config.yaml, an empty events.jsonl, program.db (schema
  /// initialised), candidates/ and output/. `hint` names the run (e.g. "noop-matvec"); characters
  /// outside [A-Za-z0-9._-] become '-'. `base` is created when missing. Throws run_error naming the
  /// path when anything cannot be created; a partly created run directory is removed again.
  static run_directory create(const std::filesystem::path& base, std::string_view hint,
                              std::string_view config_yaml);

  /// Opens a directory made by create() (for --resume). Throws user_error naming the path and the
  /// missing piece when `path` is not such a directory.
  static run_directory open_existing(const std::filesystem::path& path);

  /// The run id for `hint` at `now` with the given 16-bit suffix (exposed for tests and docs).
  static std::string make_run_id(std::string_view hint, std::chrono::system_clock::time_point now,
                                 unsigned suffix);

  const std::string& run_id() const { return run_id_; }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path config_path() const { return path_ / "config.yaml"; }
  std::filesystem::path events_path() const { return path_ / "events.jsonl"; }
  std::filesystem::path program_db_path() const { return path_ / "program.db"; }
  std::filesystem::path candidates_path() const { return path_ / "candidates"; }
  std::filesystem::path output_path() const { return path_ / "output"; }
  std::filesystem::path best_kernel_path() const { return output_path() / "best_kernel.py"; }
  std::filesystem::path summary_path() const { return path_ / "summary.json"; }
  std::filesystem::path report_path() const { return path_ / "report.html"; }

  /// The config.yaml text stored at creation.
  std::string read_config() const;

  /// candidates/<candidate_id>/, created when missing. Throws run_error when `candidate_id` is
  /// not a safe name (see is_safe_name), so no id can point outside the run directory.
  std::filesystem::path candidate_dir(std::string_view candidate_id) const;

  /// Writes candidates/<candidate_id>/<name> atomically and returns its path.
  std::filesystem::path write_candidate_file(std::string_view candidate_id, std::string_view name,
                                             std::string_view text) const;

  /// Writes output/best_kernel.py atomically.
  void write_best_kernel(std::string_view code) const;

  /// Writes summary.json atomically (pretty-printed JSON; non-finite numbers become null).
  void write_summary(const nlohmann::json& summary) const;

  /// Writes a top-level file of the run directory atomically (e.g. "report.html").
  std::filesystem::path write_file(std::string_view name, std::string_view text) const;

private:
  run_directory(std::filesystem::path path, std::string run_id)
      : path_(std::move(path)), run_id_(std::move(run_id)) {}

  std::filesystem::path path_;
  std::string run_id_;
};

} // namespace kagent::store
