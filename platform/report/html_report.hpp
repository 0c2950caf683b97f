#pragma once
// report.html: one self-contained page per run (inline CSS and SVG, no script, no external URL),
// built from summary.json, events.jsonl and program.db of a run directory. It shows the summary
// table, the best time over wall-clock time and over candidates, the lineage of the best kernel,
// a unified diff of the best kernel against the starting one, failures by cause, LLM usage and
// the run's notable events (mode changes, profiling failures, errors). Every input may be missing
// (a failed run, a run with no candidates, a crash before summary.json): the page says what is
// not known instead of failing. It also holds the whole search tree (every program under its
// parent), a collapsed details block per candidate (diff against its parent, direction, model,
// prompts and replies from candidates/<id>/, failure and log tail, time and spread, roofline) and
// the distance of the verified kernels to the roofline. A run still in progress (no summary.json,
// run_state status "running") gets a page that reloads itself every 30 s (a meta refresh: still
// no script).
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "platform/store/program_db.hpp"

namespace kagent::report {

/// One text file of candidates/<id>/ (prompt, reply, verification log, profile error...), read
/// up to candidate_file_limit bytes: the head of a prompt or reply, the tail of a log.
struct candidate_file {
  std::string name;
  std::string text;            ///< the part read, control characters replaced, whole UTF-8 characters
  std::uintmax_t size = 0;     ///< the file's size in bytes
  bool truncated = false;      ///< text is only part of the file
  bool from_tail = false;      ///< the part is the file's end (logs)
  bool left_out = false;       ///< not read at all: the page's budget for files was spent
};

/// Bytes read of one candidate file, and of all of them together.
inline constexpr std::size_t candidate_file_limit = 20 * 1024;
inline constexpr std::size_t candidate_files_budget = 8 * 1024 * 1024;

/// Everything the page is built from.
struct report_data {
  std::string run_id;                               ///< the run directory's name
  nlohmann::json summary = nlohmann::json::object();  ///< {} when summary.json is missing
  std::vector<nlohmann::json> events;               ///< events.jsonl, in order
  bool have_db = false;                             ///< program.db could be read
  std::vector<store::program_record> programs;      ///< insertion order
  std::vector<store::llm_usage_row> llm_usage;
  std::map<std::string, std::int64_t> failures_by_cause;
  std::vector<std::string> problems;                ///< inputs that could not be read, one line each
  std::map<std::string, std::string> state;         ///< program.db run_state (status, diverged, profile:<id>...)
  std::vector<store::attempt_record> attempts;
  std::vector<store::reflexion_record> reflexions;
  /// candidates/<id>/ text files, by candidate id, in the order they were written (1_..., 2_...).
  std::map<std::string, std::vector<candidate_file>> candidate_files;
};

/// "running", "finished", "failed", "interrupted": summary.json's run_state (or what its keys
/// imply), else program.db's status when the summary is missing; "failed" when neither says.
std::string run_state_of(const report_data& d);

/// Verified programs the search set aside as diverged (too slow against their parent to become a
/// parent): run_state "diverged", candidate_result events with diverged true, "diverged" notes.
std::set<std::string> diverged_ids(const report_data& d);

/// The in-page anchor of a candidate's details: "cand-" and the id with every character outside
/// [A-Za-z0-9_.] written as -XX (hex), so that distinct ids get distinct anchors.
std::string candidate_anchor(std::string_view id);

/// The text files of candidate directory `dir` (prompts and replies from the head, logs from the
/// tail), at most candidate_file_limit bytes each; `budget` is lowered by what was read, and files
/// past it are listed as left out.
std::vector<candidate_file> read_candidate_files(const std::filesystem::path& dir, std::size_t& budget);

/// Reads the three inputs of `run_dir`; a missing or unreadable one is noted in `problems`.
report_data load_report_data(const std::filesystem::path& run_dir);

/// The best kernel's ancestry, starting kernel first and `best_id` last, following parent_id
/// (stops at a missing parent or a cycle). Empty when `best_id` is not among `programs`.
std::vector<store::program_record> lineage(const std::vector<store::program_record>& programs,
                                           const std::string& best_id);

/// The id of the kernel the page calls best: summary.best_program_id, else the fastest verified
/// program with a time; "" when there is none.
std::string best_program_id(const report_data& d);

/// The page as HTML text.
std::string render_report_html(const report_data& d);

/// Builds `run_dir`/report.html (atomically) from the run directory's files. Returns its path.
/// Throws run_error when the page cannot be written; unreadable inputs only leave gaps.
std::filesystem::path write_report_html(const std::filesystem::path& run_dir);
/// Same, with the summary given (e.g. the one the manager just sent) instead of summary.json.
std::filesystem::path write_report_html(const std::filesystem::path& run_dir, const nlohmann::json& summary);

} // namespace kagent::report
