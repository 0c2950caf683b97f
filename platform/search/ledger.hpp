#pragma once
// The search ledger: the rules of a run's search as plain code, values in and values out. It plans
// candidates (ids, rounds, what each one expands), judges a finished candidate (duplicate, new best,
// divergence, whether the strategy sees it), knows when a round is done, and rebuilds itself from
// program.db's records for --resume (returning what the run must do next). The manager actor keeps
// what is about time and failure: dispatch, timeouts, supervision, and the commits to program.db.
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "platform/common/failure_kind.hpp"
#include "platform/search/strategy.hpp"
#include "platform/store/program_db.hpp"

namespace kagent::search {

/// One planned candidate: the strategy's choice with the id and round the ledger gave it.
struct planned {
  std::string id;          ///< r<round>_c<n>, n counting over the whole run
  program_entry parent;
  int round = 0;
  int direction = 1;       ///< 1-based bottleneck direction
  std::string model;
  int sample = 0;
  /// A launch-constant variant of the parent (platform/search/tune.hpp), written by no LLM: the
  /// constants it sets, its label and its source. Empty for a candidate the LLM writes.
  std::map<std::string, int> tune;
  std::string tune_label;
  std::string code;
  bool tuned() const { return !tune.empty(); }
};

/// The committed form of a plan (program.db run_state `spec:<id>`), and back.
nlohmann::json plan_to_json(const planned& p);

/// A finished candidate as the device and the LLM left it, before the ledger's rules.
struct finished {
  std::string id;
  bool ok = false;            ///< verified and benchmarked
  double time_ms = not_measured;
  std::string code;
  std::string code_hash;      ///< compiled-code hash from the evaluator; "" when it gave none
  std::optional<failure_kind> failure_cause;  ///< when !ok; none reads as unknown
  std::string error;
};

/// The ledger's verdict on a finished candidate.
struct judgement {
  bool ok = false;            ///< verified, measured and not a duplicate
  std::optional<failure_kind> failure_cause;  ///< when !ok: the candidate's own cause (unknown when it named none), or duplicate
  std::string error;
  std::string code_hash;      ///< what program.db stores: the compiled-code hash, else sha256 of the code
  bool new_best = false;      ///< faster than every kernel known before it (SPEC §14 B.81)
  bool diverged = false;      ///< verified, but past divergence_threshold against its parent (SPEC §4.3)
  double best_ms = not_measured;  ///< the run's best after this result
  bool fed = false;           ///< entered the strategy (async) or this round's results (rounds)
};

/// What the run does after --resume rebuilt the ledger.
enum class resume_step {
  refill,       ///< async schedule: plan_more() and go on
  dispatch,     ///< candidates are queued: run them
  end_round,    ///< the current round was planned and every candidate of it finished: close it
  start_round,  ///< plan round `resume_plan::start_round`
  finish,       ///< the search had ended (the strategy says stop)
};

struct resume_plan {
  /// Pending candidates with their original ids and plans, in program.db order.
  std::vector<planned> requeued;
  /// Candidates of a round that a kill cut off while it was being planned: planned now under the ids
  /// of the pending rows whose plan was never committed. They must be committed before they run.
  std::vector<planned> replanned;
  resume_step next = resume_step::start_round;
  int start_round = 1;   ///< for resume_step::start_round
  int round_done = 0;    ///< the last round committed as done
  int pending = 0;       ///< pending rows found
};

class ledger {
public:
  struct rules {
    int max_rounds = 1;
    double divergence_threshold = 50.0;  ///< in %, against the parent's time
    bool async = false;                  ///< no round barrier (SPEC schedule: async)
  };

  ledger(std::unique_ptr<search_strategy> strategy, rules r);

  const search_strategy& strategy() const { return *strategy_; }
  bool async() const { return rules_.async; }
  int round() const { return round_; }
  int next_candidate() const { return next_candidate_; }
  const std::set<std::string>& diverged() const { return diverged_; }
  /// Candidates planned and not yet recorded.
  size_t outstanding() const { return outstanding_.size(); }

  /// A new run: the verified, measured starting kernel.
  void start(const program_entry& initial);

  /// Rounds schedule: the candidates of round `r` (empty: the strategy has nothing to expand).
  std::vector<planned> plan_round(int r);
  /// Async schedule: every (parent, direction, model, sample) of the current beam not planned yet,
  /// from parents below generation max_rounds.
  std::vector<planned> plan_more();
  /// The next launch-constant variant not tried yet (at most `per_kernel` per kernel) of the fastest
  /// `top` verified kernels, fastest first; none when their sweeps are done. A variant whose source
  /// is one the run has seen already (a step back to its parent's values, an LLM's kernel) is skipped
  /// without being run. Its id is r<round>_t<n>; it is outstanding like any planned candidate.
  std::optional<planned> plan_tune(size_t per_kernel, size_t top);
  /// Async schedule: nothing is outstanding and plan_more() offers nothing (call after plan_more).
  bool async_done() const { return outstanding_.empty(); }

  /// The program this compiled code duplicates: a verified one, or an in-flight candidate that
  /// claimed it first. "" when the code is new or the hash is "".
  std::string duplicate_of(const std::string& code_hash, const std::string& id) const;
  /// Claims a new hash for an in-flight candidate (before its profile), so that an identical
  /// sibling finishing later is the duplicate. Does nothing for "" or a known hash.
  void claim(const std::string& code_hash, const std::string& id);

  /// Records a finished candidate (once; a second call for the same id throws std::logic_error).
  judgement record(const finished& f);
  /// Rounds schedule: every candidate of the current round has its result.
  bool round_done() const { return outstanding_.empty(); }

  struct round_close {
    std::optional<program_entry> best;
    bool terminate = false;  ///< the strategy ends the search after this round
  };
  /// Rounds schedule: hands the round's results to the strategy.
  round_close end_round();
  bool should_terminate() const { return strategy_->should_terminate(round_, rules_.max_rounds); }

  /// The fastest kernel known now: the strategy's best or a faster result of the current round.
  std::optional<program_entry> best() const;
  /// The strategy's resumable state (program.db run_state `strategy_state`).
  nlohmann::json strategy_state() const { return strategy_->save_state(); }

  /// --resume: rebuilds the ledger from program.db (programs in commit order, the committed plans by
  /// id, the last round done, the diverged ids) and says what to do next.
  resume_plan resume(const std::vector<store::program_record>& programs,
                     const std::map<std::string, nlohmann::json>& plans, int round_done,
                     const std::set<std::string>& diverged, const std::string& default_model);

private:
  bool feeds(const std::string& id, const std::string& status, bool duplicate, bool measured) const;
  planned take(const candidate_plan& plan, int round);
  static std::string combo(const std::string& parent, int direction, const std::string& model, int sample);

  std::unique_ptr<search_strategy> strategy_;
  rules rules_;
  bool greedy_ = false;
  int round_ = 0;
  int next_candidate_ = 0;
  std::set<std::string> expanded_;                    ///< parent|direction|model|sample planned so far
  int next_tune_ = 0;
  std::set<std::string> tuned_;                       ///< parent|label of every variant planned so far
  std::vector<program_entry> tunable_;                ///< verified kernels (not diverged), in arrival order
  std::set<std::string> seen_code_;                   ///< sha256 of every source planned or recorded
  std::optional<program_entry> best_variant_;         ///< the fastest verified variant (none enters the strategy)
  std::map<std::string, planned> outstanding_;        ///< planned, no result yet
  std::map<std::string, std::string> verified_hash_;  ///< code hash -> the verified program that has it
  std::map<std::string, std::string> claims_;         ///< code hash -> the in-flight candidate that claimed it
  std::set<std::string> diverged_;
  std::vector<program_entry> round_results_;          ///< rounds: this round's entries for the strategy
};

} // namespace kagent::search
