#pragma once
// The final summary, from summary.json (the manager's keys: eager_ms, compile_ms, initial_ms,
// best_ms, best_program_id, rounds, candidates, verified, failed, failures_by_cause, llm{...},
// wall_s, ...). Any key may be missing or null: it prints "n/a", never inf or nan.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kagent::report {

/// One time of the summary: what, its time, and the best kernel's speed-up over it.
struct timing_row {
  std::string label;     ///< "PyTorch eager", "torch.compile", "starting kernel", "best kernel"
  std::string time;      ///< "0.1234 ms" or "n/a"
  std::string speedup;   ///< best kernel's speed-up over this time: "1.85x" or "n/a"
};

/// Every value the table shows, already formatted (shared by the text table and report.html).
struct summary_view {
  std::string title;                  ///< "amd (beam_search) on examples/matvec"
  bool success = false;
  std::string error;                  ///< why the run failed ("" when it did not)
  std::vector<timing_row> timings;    ///< eager, torch.compile, starting, best
  std::string best_program_id;        ///< "" when none
  std::string rounds, candidates, verified, failed;  ///< counts of candidates (not the starting kernel) or "n/a"
  std::string duplicates = "n/a";     ///< candidates whose code was already known (not failures)
  bool interrupted = false;           ///< stopped by Ctrl-C / SIGTERM (summary.interrupted)
  std::vector<std::pair<std::string, std::string>> failures_by_cause;  ///< cause -> count, by count desc
  std::string llm_calls, llm_failed_calls, llm_tokens_in, llm_tokens_out, llm_cost;  ///< or "n/a"
  std::vector<std::string> synthetic_devices;  ///< "gpu1", ... (empty: none)
  std::string wall_time;              ///< "12:03" or "n/a"
  /// "19.6 s, 2.18 s per candidate, GPU busy 65%, of it the kernel directory's test.py 3.5 s"; "" when
  /// summary.json has no device_s (then no line is printed)
  std::string device_time;
  /// summary.json's user_test_s where it is a part of device_s (> 0 and at most it); else none
  std::optional<double> user_test_s;
  std::string best_kernel_path, run_dir;
};

/// The devices in synthetic analysis mode according to the summary: "synthetic_devices" (an array
/// of ids), "analysis_mode" / "analysis_modes" (object id -> mode), or "devices_synthetic".
std::vector<std::string> synthetic_devices_of(const nlohmann::json& summary);

summary_view make_summary_view(const nlohmann::json& summary);

/// The summary as plain text for a terminal: a heading line, a table of times and speed-ups, then
/// counts, failures by cause, LLM usage and synthetic devices. Ends with a newline.
std::string format_summary_table(const nlohmann::json& summary);

} // namespace kagent::report
