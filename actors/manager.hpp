#pragma once
// The manager: root supervisor of a run, a stateful actor whose steps are the methods below. It owns
// program.db and the search ledger (platform/search: plans, verdicts, rounds, resume planning, the
// summary), hands candidates to gpu workers (least loaded first, at most num_workers in flight),
// supervises workers and profilers, and writes the final artifacts. Every decision that matters for
// --resume is committed to program.db before it takes effect.
#include <caf/all.hpp>

#include <chrono>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/context.hpp"
#include "actors/llm_client.hpp"
#include "messages/messages.hpp"
#include "platform/profile_core/roofline.hpp"
#include "platform/search/concurrency.hpp"
#include "platform/search/ledger.hpp"
#include "platform/search/summary.hpp"
#include "platform/store/program_db.hpp"
#include "platform/store/util.hpp"

namespace kagent {

/// Spawns the gpu worker of one device for the manager (which monitors it). The run spawns
/// gpu_worker_actor; the manager's protocol test spawns a scripted fake instead.
/// `remote`: the device when it is another node's (invalid for one of this node's).
using gpu_worker_factory = std::function<caf::actor(caf::event_based_actor* manager, int worker_index, int device_id,
                                                    llm_api llm, device_actor_type remote)>;

/// The gpu workers of a real run: gpu_worker_actor, one per device.
gpu_worker_factory real_gpu_workers(context_ptr ctx);

class manager_state {
public:
  static inline const char* name = "manager";

  caf::behavior start(caf::stateful_actor<manager_state>* self, context_ptr ctx, caf::actor waiter,
                      gpu_worker_factory workers);

private:
  struct worker_slot {
    caf::actor actor;
    int device_id = 0;
    int inflight = 0;
    int restarts = 0;
    analysis_mode mode = analysis_mode::profiled;  ///< as its gpu worker reported it (the worker decides)
    std::string synthetic_reason;
    bool lost = false;  ///< a node's device whose node is gone: nothing is sent to it again
  };
  struct inflight_candidate {
    int worker = 0;
    candidate_spec spec;
    /// Recorded before its reflexion (candidate_measured): the pipeline holds its slot until the
    /// candidate_result, which only adds the reflexion.
    std::optional<candidate_result> measured;
  };
  /// The search is over and the run ends once the reflexions in flight and the final profile are done.
  struct pending_end {
    bool success = true;
    std::string error;
  };

  // ---- the run's beginning ------------------------------------------------------------------------
  void on_start();
  void start_fresh();
  void on_initial(const evaluation& e, const std::filesystem::path& work_dir);
  void run_start_checks();
  void on_start_checks(const evaluation& e);
  void resume();
  void begin_search();
  // ---- planning and dispatch ----------------------------------------------------------------------
  candidate_spec spec_of(const search::planned& plan) const;
  void commit_plan(const search::planned& plan);
  void start_round(int r);
  void end_round();
  void refill();
  void pump();
  void request_analysis(const candidate_spec& spec);
  void on_analysis(const std::string& parent_id, kernel_analysis analysis, double device_s,
                   const std::string& error = "");
  void dispatch(candidate_spec spec);
  void dispatch_to(size_t k, candidate_spec spec);
  /// Launch-constant variants (cfg.tune_variants): one per device while the search waits for the LLM.
  void tune_while_waiting();
  void commit_tune(const search::planned& plan);
  /// Candidates in flight that the LLM writes (the pipelines num_workers counts).
  int llm_inflight() const;
  double best_ms_now() const;
  void publish_best();
  size_t least_loaded() const;
  nlohmann::json device_labels() const;
  void save_device_labels();
  // ---- results ------------------------------------------------------------------------------------
  void on_measured(const candidate_measured& m);
  void on_result(const candidate_result& res);
  void record(const candidate_result& res, const candidate_spec& spec, const worker_slot& w, bool reflexion_pending);
  void close_recorded(const candidate_result& res, const candidate_result& measured, const candidate_spec& spec,
                      const worker_slot& w);
  void after_pipeline();
  void size_pipelines(double llm_s, double device_s);
  void prime_pipelines(double analysis_llm_s);
  void resize_pipelines();
  void commit_result(const candidate_result& res, const candidate_spec& spec, const worker_slot& w,
                     const search::judgement& j);
  void emit_result(const candidate_result& res, const candidate_spec& spec, const worker_slot& w,
                   const search::judgement& j, bool reflexion_pending = false);
  void roofline_stop(const std::optional<kernel_profile>& prof, const std::string& id);
  void keep_profile(const std::string& id, const kernel_profile& prof);
  dedup_answer on_dedup(const dedup_query& q);
  // ---- supervision --------------------------------------------------------------------------------
  void spawn_worker(size_t k);
  void on_worker_down(const caf::down_msg& dm);
  void on_node_lost(size_t k, const caf::error& reason);
  void on_node_joined(const node_joined& j);
  std::string label_of(int device_id) const;
  void on_profiling_failed(const profiling_failed& pf);
  caf::result<bool> interrupt(int sig);
  // ---- the end ------------------------------------------------------------------------------------
  std::optional<program_entry> fastest_verified();
  bool profile_kernel(const program_entry& k, const std::string& label, const std::string& why,
                      std::function<void(const std::optional<kernel_profile>&)> then);
  void finish(bool success, const std::string& error);
  void end_when_settled();
  void finish_now(bool success, const std::string& error);
  search::run_identity identity() const;
  search::summary_facts facts(bool success, const std::string& error) const;
  void shut_down(const run_finished& end);
  // ---- bookkeeping --------------------------------------------------------------------------------
  void emit(event_kind kind, nlohmann::json payload);
  nlohmann::json all_sessions() const;
  void save_session();
  void save_modes();
  nlohmann::json llm_models_json() const;

  caf::stateful_actor<manager_state>* self_ = nullptr;
  context_ptr ctx_;
  caf::actor waiter_;
  gpu_worker_factory make_worker_;
  std::map<int, remote_device> remotes_;  ///< the nodes' devices of this session, by run-unique id
  int next_remote_id_ = 100;
  std::vector<caf::actor> node_links_;    ///< one per node the run names (actors/node_link.hpp)
  std::filesystem::path run_path_;
  std::unique_ptr<store::program_db> db_;
  std::unique_ptr<search::ledger> ledger_;           ///< the search's rules: plans, verdicts, rounds, resume
  std::unique_ptr<roofline_analyzer> stop_rule_;     ///< run-level roofline stop check (new bests only)
  caf::actor reporter_;
  llm_client_type llm_;
  std::vector<worker_slot> workers_;
  std::deque<candidate_spec> queue_;                 ///< planned, waiting for a slot or an analysis
  std::map<std::string, inflight_candidate> inflight_;
  std::map<std::string, kernel_analysis> analysis_;  ///< parent id -> baseline analysis
  std::set<std::string> analyzing_;
  /// Parent analyses in flight: their requests wait without a timeout, so the end of the run ends them.
  std::map<std::string, caf::actor> analysts_;
  std::map<std::string, kernel_profile> profiles_;   ///< program id -> its profile
  std::map<std::string, double> spreads_;            ///< candidate -> IQR of its timed calls / median, in %
  std::string default_model_;
  int slots_ = 1;
  double eager_ = not_measured, compile_ = not_measured, initial_ = not_measured;
  std::string references_cached_at_;  ///< eager_ / compile_ came from the reference cache, timed then
  double initial_device_s_ = 0;  ///< the starting kernel's evaluation on the device (auto's first estimate)
  bool finished_ = false;
  int interrupted_by_ = 0;  ///< the signal that interrupted the run (0: none)
  bool resumed_ = false;
  bool stop_requested_ = false;
  bool final_profile_requested_ = false;
  bool final_profile_running_ = false;
  /// The starting kernel's test.py and reference timings (device_mode::start_checks) run on the first
  /// device while its analysis waits for the LLM; no candidate is dispatched before they are done.
  enum class start_checks { waiting, running, done };
  start_checks checks_ = start_checks::waiting;
  std::optional<pending_end> ending_;  ///< finish() was called; the run waits for what is still in flight
  std::string stop_reason_;
  int profiling_failures_ = 0;
  nlohmann::json mode_changes_ = nlohmann::json::array();
  double device_s_ = 0, llm_s_ = 0;
  double user_test_s_ = 0;  ///< of device_s_, the kernel directory's test.py runs
  std::optional<search::concurrency_meter> meter_;  ///< num_workers: auto
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  /// Earlier sessions of this run (--resume), as program.db's run_state `sessions` has them; this
  /// session is appended whenever it is saved, so the totals are true across kill -9 and resume.
  nlohmann::json prior_sessions_ = nlohmann::json::array();
  std::string session_started_ = store::iso_utc_now();
};

/// Root supervisor of a run. Sends `waiter` a run_finished (exit code, summary.json's document) at the end.
caf::behavior manager_actor(caf::stateful_actor<manager_state>* self, context_ptr ctx, caf::actor waiter,
                            gpu_worker_factory workers);

} // namespace kagent
