#pragma once
// report.html: one self-contained page per run (inline CSS and SVG, no script, no external URL),
// built from summary.json, events.jsonl and program.db of a run directory. It shows the summary
// table, the best time over wall-clock time and over candidates, the lineage of the best kernel,
// a unified diff of the best kernel against the starting one, failures by cause, LLM usage and
// the run's notable events (mode changes, profiling failures, errors). Every input may be missing
// (a failed run, a run with no candidates, a crash before summary.json): the page says what is
// not known instead of failing.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "platform/store/program_db.hpp"

namespace kagent::report {

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
};

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
