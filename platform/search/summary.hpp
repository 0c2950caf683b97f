#pragma once
// The run summary (summary.json) as a value: what the run was (filled in by the manager), and what it
// found, derived by summarize() from program.db's records by the rules users rely on: the answer is
// the fastest verified, measured kernel of the whole run; the starting kernel is no candidate; a
// duplicate is no failure; a diverged kernel is no top kernel; a search in which no candidate got an
// LLM reply failed; totals cover every session of a resumed run.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "platform/search/strategy.hpp"
#include "platform/store/program_db.hpp"
#include "platform/store/sessions.hpp"

namespace kagent::search {

/// What the run was: set by the manager, written as they are.
struct run_identity {
  std::string strategy;            ///< the config's name (amd, cpu, my_config)
  std::string search;              ///< beam_search | greedy
  std::string schedule;            ///< rounds | async
  int num_workers = 1;
  std::string num_workers_mode;    ///< fixed | auto
  std::string num_workers_reason;  ///< auto only
  std::string kernel_dir, run_dir, run_id, vendor, gpu_name, profiler_platform, version;
  nlohmann::json platform = nullptr;  ///< the platform block, per component
  std::vector<int> devices;
  bool resumed = false;
  int rounds = 0;
  std::string resume_command;      ///< written when the run was interrupted
};

/// What summarize() reads: program.db's records and what only the manager knows.
struct summary_facts {
  std::vector<store::program_record> programs;  ///< every program (the starting kernel included)
  std::vector<store::llm_usage_row> llm_usage;
  std::map<std::string, std::string> provider_of;  ///< model -> the provider it was reached through
  std::string default_provider;
  nlohmann::json sessions = nlohmann::json::array();  ///< every session of the run, this one included
  double session_wall_s = 0;
  bool ok = true;              ///< false: the run failed, `error` says why
  std::string error;
  std::string interrupted_by;  ///< SIGINT, SIGTERM; "" when the run was not interrupted
  std::set<std::string> diverged;
  std::map<std::string, double> spreads;        ///< program -> IQR of its timed calls over the median, %
  std::optional<program_entry> strategy_best;   ///< used only when program.db has no measured kernel
  double initial_ms = not_measured, eager_ms = not_measured, compile_ms = not_measured;
  std::string references_cached_at;  ///< eager / compile came from the reference cache, timed then ("": this run)
};

struct top_kernel {
  std::string program_id;
  double time_ms = not_measured;
  int generation = 0;
  std::optional<double> spread_pct;
};

struct llm_tally {
  std::int64_t calls = 0, failed_calls = 0, tokens_in = 0, tokens_out = 0;
  double cost_usd = 0;
};

struct run_summary {
  run_identity run;
  bool success = false;
  std::string error;
  std::string run_state;       ///< finished | failed | interrupted
  std::string interrupted_by;
  /// The answer: named when the run succeeded, or when it was interrupted with a measured best
  /// beyond the starting kernel (hours of search are not lost).
  std::optional<program_entry> best;
  std::optional<double> best_floor_pct;
  std::string best_kernel_path;  ///< where the manager wrote the best kernel
  double initial_ms = not_measured, eager_ms = not_measured, compile_ms = not_measured;
  std::string references_cached_at;  ///< when a run before this one timed eager_ms / compile_ms ("": this run)
  std::int64_t candidates = 0, verified = 0, duplicates = 0, failed = 0, pending = 0;
  std::map<std::string, std::int64_t> failures_by_cause;
  std::size_t diverged = 0;
  /// Launch-constant variants (tune_variants): how many ran, how many verified, and, when the best
  /// is one, what it changes ("BLOCK_K 512->1024"); their counts are part of the candidates above.
  std::int64_t variants = 0, variants_verified = 0;
  std::string best_tune;
  std::vector<top_kernel> top_kernels;  ///< the 5 fastest verified, diverged ones left out
  llm_tally llm;
  struct llm_row {
    std::string purpose, model, provider;
    llm_tally tally;
  };
  std::vector<llm_row> llm_by_purpose_and_model;
  std::vector<llm_row> llm_by_model;  ///< all purposes together, with the provider
  store::session_totals totals;
  double session_wall_s = 0;
  std::optional<double> gpu_busy_pct;
  // Set by the manager from its supervision: they are written as they are.
  std::string early_stop_reason;
  nlohmann::json synthetic_devices = nlohmann::json::array();
  int profiling_failures = 0;
  nlohmann::json best_roofline = nullptr;
  nlohmann::json mode_changes = nlohmann::json::array();

  /// summary.json (docs/store.md lists its keys).
  nlohmann::json to_json() const;
};

/// The run's answer, the one rule for it: the fastest verified kernel with a measured time among
/// `programs` (the earlier one on a tie), else `strategy_best`. The manager's decisions about the best
/// (its final profile, a roofline stop) and summary.json both use it.
std::optional<program_entry> answer_of(const std::vector<store::program_record>& programs,
                                       const std::optional<program_entry>& strategy_best);

/// Derives the outcome of a run from its records; `id` is copied into the result.
run_summary summarize(const run_identity& id, const summary_facts& f);

} // namespace kagent::search
