#pragma once
// The live view of a run, folded from its events (the same run_event stream that events.jsonl
// records). update() is called once per event; format_progress_line() renders the one line a TTY
// shows (redrawn with \r), format_log_line() the plain line a log gets for a significant event.
// Every payload field is optional: a missing one leaves the state as it was.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace kagent::report {

/// LLM usage as counted from events.
struct llm_tally {
  std::int64_t calls = 0;
  std::int64_t failed_calls = 0;
  std::int64_t tokens_in = 0;
  std::int64_t tokens_out = 0;
  double cost_usd = 0;
};

struct progress_state {
  double t_start_s = -1;          ///< time of run_start (else of the first event); -1 before any
  double t_last_s = -1;           ///< time of the latest event
  std::string strategy, search;
  std::string schedule = "rounds";  ///< "rounds" or "async" (run_start.schedule)
  int devices = 0;                ///< run_start.devices size
  int round = 0;                  ///< current round (rounds schedule) or highest generation seen (async)
  int max_rounds = 0;
  int round_candidates = 0;       ///< candidates handed out in the current round
  int round_results = 0;          ///< results of the current round
  int max_candidates = 0;         ///< async budget when run_start names one (max_candidates)
  bool slots_auto = false;        ///< num_workers: auto (the count follows `concurrency` events)
  int slots = 0;                  ///< concurrent candidate slots when run_start names them (num_workers / slots)
  int ok = 0;                     ///< candidates verified
  int failed = 0;                 ///< candidates failed (duplicates are not failures)
  int duplicates = 0;             ///< candidates whose code was already known
  bool gpu = true;                ///< the devices are GPUs (run_start.vendor set); "device" otherwise
  bool saw_candidate_start = false;
  /// candidate_start without a candidate_result yet (one recorded before its reflexion: no candidate_end yet)
  std::set<std::string> in_flight;
  /// Launch-constant variants (candidate_start with `tune`): those in flight, and how many ended
  /// (all / verified). They are not in the counts above, which are the search's own candidates.
  std::set<std::string> variant_ids;
  int variants_done = 0, variants_ok = 0;
  std::optional<double> initial_ms;
  std::optional<double> best_ms;
  std::string best_program_id;
  double device_s = 0;            ///< sum of device_s of candidate_result and analysis events (this session)
  bool saw_device_s = false;
  /// Earlier sessions of a resumed run (the `resume` event's `prior`): their wall seconds, device
  /// seconds and device capacity (wall x devices), so elapsed time and GPU busy are run totals.
  double prior_wall_s = 0, prior_device_s = 0, prior_capacity_s = 0;
  double llm_s = 0;               ///< sum of candidate_result.llm_s and candidate_end.llm_s
  llm_tally llm_calls;            ///< from llm_call events (the llm_client's own report)
  std::optional<llm_tally> llm_run_totals;  ///< llm_call.run_totals, when present (the client's ledger)
  std::map<int, std::string> modes;  ///< gpu id -> analysis mode, from mode_change events
  int profiling_failures = 0;
  int errors = 0;
  std::map<int, std::string> labels;  ///< gpu id -> "node/gpuN" for other nodes' devices (run_start.device_labels)
  int devices_lost = 0;               ///< node_down events: devices whose node was lost
  std::string initial_step;       ///< the starting kernel's current step (initial_step events)
  bool finished = false;          ///< run_end seen
  bool success = false;           ///< run_end.success

  /// Candidates whose result is in.
  int results() const { return ok + failed + duplicates; }
  /// Candidates started and not finished: from candidate_start events when the run sends them,
  /// else the current round's candidates without a result.
  int running() const;
  /// The LLM usage to show: the llm_call events' tally, or the client's own run totals where they
  /// are larger (llm_call.run_totals, from its usage ledger).
  llm_tally llm() const;
  /// GPU busy percentage at `now_s`: device_s / (wall time x devices) x 100; nullopt before
  /// any device_s was reported or when no wall time has passed.
  std::optional<double> gpu_busy_pct(double now_s) const;
};

/// Folds one event into the state. `t_s` is the event's time in seconds on any clock that the
/// caller also uses for now_s (the reporter uses seconds since it started).
void update(progress_state& st, const std::string& type, const nlohmann::json& payload, double t_s);

/// One line (at most `columns` wide, ASCII), e.g.
/// "03:12 round 2/10 | 14 ok, 3 failed, 4 running | best 0.1234 ms (1.85x) | GPU 87% | LLM 12.3k tok $0.42 | gpu1: synthetic"
/// `columns`: the widest line allowed (the terminal's width less one, see progress_columns).
std::string format_progress_line(const progress_state& st, double now_s, std::size_t columns = 120);

/// The plain log line for an event (already folded into `st` by update), or nullopt for events
/// that only a verbose log shows (candidate_start, llm_call, unknown types).
std::optional<std::string> format_log_line(const progress_state& st, const std::string& type,
                                           const nlohmann::json& payload, double t_s, bool verbose = false);

/// Widest progress line.
inline constexpr std::size_t progress_line_columns = 120;
/// Narrowest progress line (a terminal narrower than this wraps it; nothing better can be done).
inline constexpr std::size_t progress_line_min_columns = 24;

/// The width for the progress line on a terminal `terminal_columns` wide (0: unknown, then
/// `env_columns`, the COLUMNS variable, else 80): one less than the terminal, so that the cursor
/// never wraps onto a new row that the next redraw (\r) would leave behind; at most 120.
std::size_t progress_columns(int terminal_columns, const char* env_columns);

} // namespace kagent::report
