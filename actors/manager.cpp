// The manager's steps (actors/manager.hpp). Each method is one step of the run; continuations of
// requests call the next step by name.
#include "actors/manager.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "actors/actors.hpp"
#include "actors/analysis.hpp"
#include "actors/gpu_worker.hpp"
#include "actors/llm_client.hpp"
#include "actors/node_link.hpp"
#include "actors/reporter.hpp"
#include "platform/common/stop.hpp"
#include "platform/gpu/specs.hpp"
#include "platform/profiling/roofline_factory.hpp"
#include "platform/search/stored_run.hpp"
#include "platform/search/summary.hpp"
#include "platform/search/tune.hpp"
#include "platform/store/run_directory.hpp"
#include "platform/store/sessions.hpp"

namespace fs = std::filesystem;

namespace kagent {

namespace {

nlohmann::json num_or_null(double v) { return is_measured(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

std::chrono::milliseconds seconds_ms(double s) { return std::chrono::milliseconds(static_cast<long long>(s * 1000)); }

} // namespace

gpu_worker_factory real_gpu_workers(context_ptr ctx) {
  return [ctx](caf::event_based_actor* manager, int worker_index, int device_id, llm_api llm,
                device_actor_type remote) {
    return manager->spawn(gpu_worker_actor, ctx, worker_index, device_id, llm, caf::actor{manager}, remote);
  };
}

caf::behavior manager_actor(caf::stateful_actor<manager_state>* self, context_ptr ctx, caf::actor waiter,
                            gpu_worker_factory workers) {
  return self->state.start(self, std::move(ctx), std::move(waiter), std::move(workers));
}

caf::behavior manager_state::start(caf::stateful_actor<manager_state>* self, context_ptr ctx, caf::actor waiter,
                                   gpu_worker_factory workers) {
  install_exception_handler(self, "manager");
  self_ = self;
  ctx_ = std::move(ctx);
  waiter_ = std::move(waiter);
  make_worker_ = std::move(workers);
  for (const auto& d : ctx_->remote_devices) {
    remotes_[d.id] = d;
    next_remote_id_ = std::max(next_remote_id_, d.id + 1);
  }
  run_path_ = fs::path(ctx_->run_path);
  db_ = std::make_unique<store::program_db>(store::program_db::open(run_path_ / "program.db"));
  // Nodes that join later take ids past this session's and every earlier session's.
  next_remote_id_ = std::max(next_remote_id_, search::first_node_device_id(*db_));
  default_model_ = ctx_->cfg.llm.model.empty() ? ctx_->cfg.openai_model : ctx_->cfg.llm.model;
  ledger_ = std::make_unique<search::ledger>(
      make_strategy(ctx_->cfg, default_model_),
      search::ledger::rules{ctx_->cfg.max_rounds, ctx_->cfg.divergence_threshold,
                            ctx_->cfg.strategy_cfg.schedule == "async"});
  slots_ = std::max(1, ctx_->cfg.num_workers);
  // The roofline stop rule needs the vendor of the roofline component and the device's peaks.
  const std::string rv = ctx_->cfg.platform.roofline_analyzer;
  if (rv == "nvidia" || rv == "rocm") {
    try {
      stop_rule_ = make_roofline_analyzer(rv, ctx_->cfg.roofline,
                                          ctx_->gpu_name.empty() ? std::nullopt : find_gpu_specs(ctx_->gpu_name));
    } catch (const std::exception&) {
      stop_rule_.reset();  // no specs for this device: no stop rule, the search runs its rounds
    }
  }
  reporter_ = self->spawn<caf::linked>(reporter_actor, ctx_);
  llm_ = self->spawn<caf::linked>(llm_client_actor, ctx_, caf::actor{self}, reporter_);
  for (int id : ctx_->device_ids) workers_.push_back({caf::actor{}, id, 0, 0, analysis_mode::profiled, "", false});
  if (ctx_->cfg.num_workers_auto)
    meter_.emplace(search::concurrency_limits{static_cast<int>(std::max<size_t>(1, workers_.size())), slots_,
                                              search::auto_pipeline_cap});
  self->set_down_handler([this](caf::down_msg& dm) { on_worker_down(dm); });
  return {
      [this](start_atom) { on_start(); },
      [this](step_atom, const std::string& what) {
        // A step of the starting kernel's evaluation (the progress line shows it).
        if (!finished_) emit(event_kind::initial_step, {{"step", what}});
      },
      [this](interrupt_atom, int sig) { return interrupt(sig); },
      [this](const profiling_failed& pf) { on_profiling_failed(pf); },
      [this](const dedup_query& q) { return on_dedup(q); },
      [this](asking_atom, const std::string& pid) {
        // The starting kernel's analysis left the device for the LLM: its other checks run now.
        if (pid == "initial") run_start_checks();
      },
      [this](const candidate_measured& m) { on_measured(m); },
      [this](best_atom) { return best_ms_now(); },
      [this](const store::llm_call_record& c) {
        // Usage of one LLM call (after its retries), from the llm_client.
        db_->record_llm_call(c);
      },
      [this](const node_joined& j) { on_node_joined(j); },
      [this](const node_refused& r) {
        if (!finished_) emit(event_kind::note, {{"what", "node " + r.node + " refused this run (trying again): " + r.reason}});
      },
  };
}

// ---- the run's beginning ---------------------------------------------------------------------------

void manager_state::on_start() {
  for (size_t k = 0; k < workers_.size(); ++k) spawn_worker(k);
  for (const auto& [address, gatekeeper] : ctx_->node_gatekeepers)
    node_links_.push_back(self_->spawn<caf::detached + caf::linked>(node_link_actor, ctx_, address, gatekeeper,
                                                                    run_path_.filename().string(), caf::actor{self_}));
  emit(event_kind::run_start, {{"strategy", ctx_->cfg.name}, {"search", ledger_->strategy().name()},
                     {store::state_key::kernel_dir, ctx_->kernel_dir}, {"vendor", ctx_->vendor},
                     {"devices", ctx_->device_ids}, {"gpu_name", ctx_->gpu_name},
                     {"platform", ctx_->cfg.platform.uniform()}, {"max_rounds", ctx_->cfg.max_rounds},
                     {"schedule", ledger_->async() ? "async" : "rounds"}, {"num_workers", slots_},
                     {"num_workers_auto", meter_.has_value()},
                     {"resume", ctx_->resume}, {"sandbox", ctx_->sandbox_mode},
                     {"llm", {{"provider", ctx_->llm_chosen.provider}, {"model", ctx_->llm_chosen.model},
                              {"endpoint", ctx_->llm_chosen.endpoint}, {"reason", ctx_->llm_chosen.reason},
                              {"key_env", ctx_->llm_chosen.key_env}}},
                     {"llm_models", llm_models_json()},
                     {"sandbox_warning", ctx_->sandbox_warning}, {"device_labels", device_labels()}});
  for (const auto& n : ctx_->notes) emit(event_kind::note, {{"what", n}});
  db_->set_states({{store::state_key::status, "running"}, {store::state_key::kernel_dir, ctx_->kernel_dir},
                   {store::state_key::strategy_name, ctx_->cfg.name}});
  if (!remotes_.empty()) save_device_labels();
  if (ctx_->resume) {
    resumed_ = true;
    return resume();
  }
  save_modes();
  start_fresh();
}

// A new run evaluates the starting kernel first: verified and timed, or the run ends. What its
// analysis does not need (the kernel directory's test.py, PyTorch eager's and torch.compile's
// timings: 20-50 s of device time on the H100) runs later, while that analysis waits for its LLM
// reply (run_start_checks), and no candidate is dispatched before it passed.
void manager_state::start_fresh() {
  store::program_record init;
  init.id = "initial";
  init.round = 0;
  init.worker = -1;
  init.gpu_id = ctx_->device_ids.empty() ? 0 : ctx_->device_ids.front();
  init.status = store::program_status::pending;
  init.code = ctx_->input_code;
  if (!db_->get_program("initial")) db_->insert_program(init);
  const auto work_dir = run_path_ / "candidates" / "initial";
  fs::create_directories(work_dir);
  const auto timeout = seconds_ms(ctx_->test_timeout_s + 3 * ctx_->cfg.benchmark_timeout_s);
  self_->request(workers_.front().actor, timeout, evaluate{"initial", ctx_->input_code, device_mode::initial, work_dir.string()})
      .then([this, work_dir](const evaluation& e) { on_initial(e, work_dir); },
            [this](caf::error& err) { finish(false, "Initial kernel could not be evaluated: " + to_string(err)); });
}

void manager_state::on_initial(const evaluation& e, const fs::path& work_dir) {
  if (finished_) return;  // interrupted: the initial kernel stays pending
  device_s_ += e.wall_s;
  save_session();
  store::program_update u;
  u.code_hash = e.code_hash.empty() ? store::sha256_hex(ctx_->input_code) : e.code_hash;
  if (!e.verified || !e.benchmarked) {
    u.status = store::program_status::failed;
    u.failure_cause = to_string(e.failure_cause.value_or(failure_kind::verification));
    u.error = e.error;
    db_->update_program("initial", u);
    const auto log = work_dir / "evaluate.log";
    try {
      // What the interpreter said (its traceback and line included), beside the kernel.
      store::write_file_atomic(log, e.error + "\n--- stderr ---\n" + e.stderr_tail + "\n--- stdout ---\n" +
                                        e.stdout_tail + "\n");
    } catch (const std::exception&) {
    }
    const bool problem = e.failure_cause == failure_kind::problem;
    emit(event_kind::error, {{"what", problem ? "the kernel directory's problem.py failed" : "initial kernel failed verification"},
                   {"error", e.error.substr(0, 2000)}});
    if (problem)
      return finish(false, "The kernel directory is at fault, not the kernel: " + e.error.substr(0, 600) +
                               " (traceback in " + log.string() + ")");
    if (e.failure_cause == failure_kind::user_test)
      return finish(false, "The starting kernel fails the kernel directory's own test: " + e.error.substr(0, 2000));
    if (e.verified) return finish(false, "Initial kernel could not be timed: " + e.error.substr(0, 300));
    return finish(false, "Initial kernel failed correctness verification: " + e.error.substr(0, 300));
  }
  // The measured initial time is stored (SPEC §14 B.87): parents carry real times.
  initial_ = e.time_ms;
  publish_best();
  u.status = store::program_status::verified;
  u.time_ms = e.time_ms;
  u.floor_pct = measured_or_none(e.floor_pct);
  db_->update_program("initial", u);
  db_->set_state_json(store::state_key::initial_ms, num_or_null(initial_));
  initial_device_s_ = e.wall_s;
  emit(event_kind::initial, {{"initial_ms", num_or_null(initial_)}, {"best_ms", num_or_null(initial_)},
                             {"device_s", e.wall_s}});
  ledger_->start({"initial", "", ctx_->input_code, e.time_ms, 0, *u.code_hash});
  // KAGENT_START_CHECKS=first: the checks before the analysis, as before they overlapped it (for
  // side-by-side measurements: benchmarks/h200/standby_session.sh CHECKS=1).
  if (env_get(ctx_->child_env, "KAGENT_START_CHECKS").value_or("") == "first") run_start_checks();
  begin_search();
}

// The starting kernel's test.py and reference timings, on the device that evaluated it. Sent once:
// when the starting kernel's analysis leaves the device for the LLM (asking_atom), at once when that
// analysis profiles on another device or needs no device, or when the run ends before either.
void manager_state::run_start_checks() {
  if (finished_ || checks_ != start_checks::waiting) return;
  checks_ = start_checks::running;
  const auto work_dir = run_path_ / "candidates" / "initial";
  fs::create_directories(work_dir);
  const auto timeout = seconds_ms(2 * ctx_->cfg.benchmark_timeout_s + ctx_->cfg.user_test_timeout_s + 60);
  self_->request(workers_.front().actor, timeout,
                 evaluate{"initial", ctx_->input_code, device_mode::start_checks, work_dir.string()})
      .then([this](const evaluation& e) { on_start_checks(e); },
            [this](caf::error& err) {
              if (finished_) return;
              finish(false, "The starting kernel could not be checked: " + to_string(err));
            });
}

void manager_state::on_start_checks(const evaluation& e) {
  if (finished_) return;  // interrupted: a resumed run checks it again
  device_s_ += e.wall_s;
  user_test_s_ += e.user_test_s;
  save_session();
  if (e.failure_cause == failure_kind::user_test) {
    // As if it had failed at the start: the starting kernel is not a verified program, and the run
    // ends with the test's output (a resume starts over).
    store::program_update u;
    u.status = store::program_status::failed;
    u.failure_cause = to_string(failure_kind::user_test);
    u.error = e.error;
    db_->update_program("initial", u);
    emit(event_kind::error, {{"what", "the starting kernel fails the kernel directory's test.py"},
                             {"error", e.error.substr(0, 2000)}});
    return finish(false, "The starting kernel fails the kernel directory's own test: " + e.error.substr(0, 2000));
  }
  if (e.failure_cause) {
    // The references are what the speed-ups are quoted against, not what the search needs: the run
    // goes on without them, and says so.
    emit(event_kind::note, {{"what", "PyTorch eager and torch.compile were not timed (the run goes on without "
                                     "them): " + e.error.substr(0, 600)}});
  } else {
    eager_ = e.eager_ms;
    compile_ = e.compile_ms;
    references_cached_at_ = e.references_cached_at;
  }
  checks_ = start_checks::done;
  db_->set_states({{store::state_key::eager_ms, num_or_null(eager_).dump()},
                   {store::state_key::compile_ms, num_or_null(compile_).dump()},
                   {store::state_key::references_cached_at, references_cached_at_},
                   {store::state_key::start_checked, "1"}});
  emit(event_kind::start_checked, {{"eager_ms", num_or_null(eager_)}, {"compile_ms", num_or_null(compile_)},
                                   {"user_test", e.user_test_s > 0 ? "passed" : "not run"},
                                   {"user_test_s", e.user_test_s}, {"device_s", e.wall_s},
                                   {"references_cached_at", e.references_cached_at}});
  if (ending_) return end_when_settled();
  pump();
}

void manager_state::begin_search() {
  if (ledger_->async()) return refill();
  start_round(1);
}

// --resume: the ledger rebuilds the search from what program.db committed (exactly the state an
// uninterrupted run had at that point) and says what comes next; pending candidates run again under
// their original ids and plans, so none is lost and none is evaluated twice.
void manager_state::resume() {
  auto init = db_->get_program("initial");
  if (!init || init->status != store::program_status::verified) return start_fresh();
  auto stored = search::load_stored_run(*db_);
  eager_ = stored.eager_ms;
  compile_ = stored.compile_ms;
  references_cached_at_ = stored.references_cached_at;
  prior_sessions_ = stored.sessions;
  initial_ = measured_or_not(init->time_ms);
  // A run that was stopped before the starting kernel's checks ended runs them again (runs of
  // versions that checked it in one step have its references and no start_checked).
  if (db_->get_state(store::state_key::start_checked) || eager_ >= 0) checks_ = start_checks::done;
  analysis_ = std::move(stored.analyses);
  profiles_ = std::move(stored.profiles);
  for (auto& w : workers_)
    if (stored.synthetic_devices.count(w.device_id)) {
      w.mode = analysis_mode::synthetic;
      w.synthetic_reason = "synthetic before the resume";
      self_->send(w.actor, mode_atom::value, analysis_mode::synthetic);
    }
  const int round_done = stored.round_done;
  const auto plan = ledger_->resume(db_->list_programs(), stored.plans, round_done, stored.diverged, default_model_);
  publish_best();  // the best the earlier sessions recorded
  for (const auto& q : plan.requeued) queue_.push_back(spec_of(q));
  for (const auto& q : plan.replanned) commit_plan(q);
  // What the earlier sessions did, so that the progress line goes on from their totals.
  const auto prior = store::totals_of(prior_sessions_);
  const auto by_cause = db_->failures_by_cause();
  const long dups = by_cause.count("duplicate") ? static_cast<long>(by_cause.at("duplicate")) : 0;
  emit(event_kind::resume, {{"from_round", ledger_->round()}, {store::state_key::round_done, round_done},
                  {"pending", plan.pending}, {"verified", db_->count(store::program_status::verified) - 1},
                  {"failed", db_->count(store::program_status::failed) - dups}, {"duplicates", dups},
                  {"prior", {{"sessions", prior.sessions}, {"wall_s", prior.wall_s}, {"device_s", prior.device_s},
                             {"capacity_s", prior.capacity_s}}},
                  {"next_candidate", ledger_->next_candidate()}});
  auto best = ledger_->strategy().best();
  emit(event_kind::initial, {{"initial_ms", num_or_null(initial_)}, {"eager_ms", num_or_null(eager_)},
                   {"compile_ms", num_or_null(compile_)},
                   {"best_ms", best ? num_or_null(best->time_ms) : num_or_null(initial_)}});
  run_start_checks();
  switch (plan.next) {
    case search::resume_step::refill: return refill();
    case search::resume_step::dispatch: return pump();
    case search::resume_step::end_round: return end_round();
    case search::resume_step::start_round: return start_round(plan.start_round);
    case search::resume_step::finish: return finish(true, "");
  }
}

// ---- planning and dispatch -------------------------------------------------------------------------

candidate_spec manager_state::spec_of(const search::planned& plan) const {
  candidate_spec spec;
  spec.id = plan.id;
  spec.parent_id = plan.parent.id;
  spec.round = plan.round;
  spec.bottleneck_id = plan.direction;
  spec.sample_idx = plan.sample;
  spec.model = plan.model;
  spec.parent_code = plan.parent.code;
  spec.parent_time_ms = plan.parent.time_ms;
  spec.work_dir = (run_path_ / "candidates" / spec.id).string();
  spec.tuned_code = plan.code;
  spec.tune_label = plan.tune_label;
  return spec;
}

namespace {

/// The pending row of a planned candidate or variant.
store::program_record pending_row(const search::planned& plan) {
  store::program_record rec;
  rec.id = plan.id;
  rec.parent_id = plan.parent.id;
  rec.round = plan.round;
  rec.status = store::program_status::pending;
  if (plan.tuned()) {
    rec.bottleneck = search::variant_bottleneck(plan.tune_label);
  } else {
    rec.model = plan.model;
    rec.bottleneck = fmt::format("direction {}", plan.direction);
  }
  return rec;
}

} // namespace

// A variant's plan is committed before its row: a kill between the two leaves a plan that nothing
// reads (its id is given again), never a pending row that --resume cannot rebuild.
void manager_state::commit_tune(const search::planned& plan) {
  db_->set_state(std::string{store::state_key::spec_prefix} + plan.id, search::plan_to_json(plan).dump());
  db_->insert_program(pending_row(plan));
}

// A planned candidate: recorded as pending with its plan before anything runs, so that --resume
// finds it again.
void manager_state::commit_plan(const search::planned& plan) {
  // A pending row without its plan (a kill between the two commits) is completed, not duplicated.
  if (!db_->get_program(plan.id)) db_->insert_program(pending_row(plan));
  db_->set_states({{std::string{store::state_key::spec_prefix} + plan.id, search::plan_to_json(plan).dump()},
                   {store::state_key::next_candidate, std::to_string(ledger_->next_candidate())}});
  queue_.push_back(spec_of(plan));
}

void manager_state::start_round(int r) {
  db_->set_state(store::state_key::round, std::to_string(r));
  auto plans = ledger_->plan_round(r);
  if (plans.empty()) return finish(true, "");
  emit(event_kind::round_start, {{"round", r}, {"max_rounds", ctx_->cfg.max_rounds}, {"candidates", plans.size()}});
  for (const auto& plan : plans) commit_plan(plan);
  pump();
}

void manager_state::end_round() {
  const auto closed = ledger_->end_round();
  const auto& best = closed.best;
  const int round = ledger_->round();
  db_->set_states({{store::state_key::round, std::to_string(round)},
                   {store::state_key::round_done, std::to_string(round)},
                   {store::state_key::strategy_state, ledger_->strategy_state().dump()}});
  emit(event_kind::round_end, {{"round", round},
                     {"best_ms", best ? num_or_null(best->time_ms) : nlohmann::json(nullptr)},
                     {"best_program_id", best ? best->id : ""}});
  auto go_on = [this, closed, round] {
    if (stop_requested_ || closed.terminate) return finish(true, "");
    start_round(round + 1);
  };
  // `profile: parents`: a new best has no profile yet. Where an early stop may follow from its
  // roofline, it is profiled now, before the next round spends anything (the next round's analysis
  // reuses this profile, so it costs no extra profile).
  if (ctx_->cfg.profile == "parents" && stop_rule_ && stop_rule_->config().early_stop && best &&
      best->id != "initial" && !profiles_.count(best->id) && !stop_requested_ && !closed.terminate) {
    const auto id = best->id;
    if (profile_kernel(*best, "sol", "profile of the new best (a roofline stop may follow)",
                       [this, id, go_on](const std::optional<kernel_profile>& prof) {
                         roofline_stop(prof, id);
                         go_on();
                       }))
      return;
  }
  go_on();
}

// The async schedule: every (parent, direction, model, sample) of the current beam is expanded at
// most once; a parent of generation max_rounds is not expanded. The run ends when nothing is
// outstanding and the beam offers nothing new.
void manager_state::refill() {
  if (finished_) return;
  if (!stop_requested_)
    for (const auto& plan : ledger_->plan_more()) commit_plan(plan);
  if (ledger_->async_done() && analyzing_.empty()) return finish(true, "");
  pump();
}

// Queued candidates go out while slots are free; a candidate whose parent has no analysis yet waits
// for it (one analysis per parent, shared by its candidates). The whole queue is walked even when the
// slots are full, so that every waiting parent's analysis starts at once and not when a slot frees up
// (on the H200 with 20 s LLM replies, a new best's analysis started 92 s after it was planned).
void manager_state::pump() {
  if (finished_) return;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (!it->tuned() && !analysis_.count(it->parent_id)) {
      if (!analyzing_.count(it->parent_id)) request_analysis(*it);
      ++it;
      continue;
    }
    if (checks_ != start_checks::done || (!it->tuned() && llm_inflight() >= slots_)) {
      ++it;
      continue;
    }
    auto spec = *it;
    it = queue_.erase(it);
    dispatch(std::move(spec));
  }
  tune_while_waiting();
}

int manager_state::llm_inflight() const {
  return static_cast<int>(std::count_if(inflight_.begin(), inflight_.end(), [](const auto& c) { return !c.second.spec.tuned(); }));
}

// The device would idle while every pipeline waits for an LLM reply (its code, or a parent's
// analysis): each device that has no variant in flight gets the next launch-constant variant of the
// fastest kernels. One at a time per device, so a candidate the LLM wrote waits at most one variant's
// evaluation for its device. A variant requeued by --resume goes out through the queue.
void manager_state::tune_while_waiting() {
  if (ctx_->cfg.tune_variants <= 0 || finished_ || ending_ || stop_requested_ || interrupted_by_ != 0 ||
      checks_ != start_checks::done)
    return;
  const bool waiting = !analyzing_.empty() || std::any_of(inflight_.begin(), inflight_.end(), [](const auto& c) {
                         return !c.second.spec.tuned() && !c.second.measured;
                       });
  if (!waiting) return;
  // The kernels the strategy keeps: beam search's beam, greedy's one best.
  const int top = ledger_->strategy().name() == "greedy" ? 1 : std::max(1, ctx_->cfg.strategy_cfg.num_top_kernels);
  for (size_t k = 0; k < workers_.size(); ++k) {
    if (workers_[k].lost) continue;
    const bool busy = std::any_of(inflight_.begin(), inflight_.end(), [k](const auto& c) {
      return c.second.spec.tuned() && c.second.worker == static_cast<int>(k);
    });
    if (busy) continue;
    auto plan = ledger_->plan_tune(static_cast<size_t>(ctx_->cfg.tune_variants), static_cast<size_t>(top));
    if (!plan) return;
    commit_tune(*plan);
    dispatch_to(k, spec_of(*plan));
  }
}

void manager_state::request_analysis(const candidate_spec& spec) {
  const std::string pid = spec.parent_id;
  analyzing_.insert(pid);
  if (pid == "initial") emit(event_kind::initial_step, {{"step", "profiling and diagnosing the starting kernel"}});
  size_t k = least_loaded();
  // With a second device of this node, the starting kernel is profiled there while the first device
  // runs its checks: neither waits for the other. (Not on another node's device: it may be another GPU.)
  if (pid == "initial" && checks_ == start_checks::waiting && ctx_->device_ids.size() > 1 && workers_.size() > 1 &&
      !workers_[1].lost)
    k = 1;
  auto a = self_->spawn(parent_analysis_actor, ctx_, workers_[k].actor, llm_);
  analysts_[pid] = a;
  // Profiled on another device (or not profiled at all): the first device is free for the checks now.
  if (pid == "initial" && (k != 0 || ctx_->cfg.profile == "never")) run_start_checks();
  analyze_parent req;
  req.parent_id = pid;
  req.code = spec.parent_code;
  req.time_ms = spec.parent_time_ms;
  req.num_bottlenecks = ledger_->strategy().directions_needed();
  req.work_dir = (run_path_ / "baseline_profiles" / pid).string();
  req.model = spec.model;
  if (auto it = profiles_.find(pid); it != profiles_.end()) req.known_profile = it->second;
  emit(event_kind::analysis_start, {{"parent_id", pid}, {"gpu_id", workers_[k].device_id},
                          {"profile_reused", req.known_profile.has_value()}});
  self_->request(a, seconds_ms(ctx_->cfg.candidate_timeout_s), req)
      .then(
          [this, pid](const parent_analysis& pa) {
            analysts_.erase(pid);
            if (finished_) return;  // interrupted: analysed again after --resume
            emit(event_kind::analysis, {{"parent_id", pid}, {"source", pa.analysis.source},
                              {"directions", pa.analysis.bottlenecks.size()},
                              {"profile_failed", pa.profile_failed}, {"device_s", pa.device_s}, {"llm_s", pa.llm_s}});
            if (pid == "initial") prime_pipelines(pa.llm_s);
            on_analysis(pid, pa.analysis, pa.device_s);
          },
          [this, pid](caf::error& err) {
            analysts_.erase(pid);
            if (finished_) return;
            // No analysis: the candidates still run, with the direction left to the model.
            emit(event_kind::error, {{"what", "parent analysis failed"}, {"parent_id", pid}, {"reason", to_string(err)}});
            on_analysis(pid, kernel_analysis{}, 0, to_string(err));
          });
}

void manager_state::on_analysis(const std::string& pid, kernel_analysis a, double device_s, const std::string& error) {
  analyzing_.erase(pid);
  if (pid == "initial") run_start_checks();  // an analysis that failed before it asked the LLM
  device_s_ += device_s;
  save_session();
  // The parent's baseline profile is its profile: the final-profile step reuses it.
  if (a.profile && !profiles_.count(pid)) {
    profiles_[pid] = *a.profile;
    // Under `profile: parents` this may be the first profile of the best kernel.
    if (auto best = fastest_verified(); best && best->id == pid) roofline_stop(a.profile, pid);
  }
  auto stored = to_json(a);
  if (!error.empty()) stored["error"] = error;
  db_->set_state(std::string{store::state_key::analysis_prefix} + pid, stored.dump());
  analysis_[pid] = std::move(a);
  pump();
}

// The device with the fewest candidates in flight (a slow node does not hold a round: it gets no more
// than its share), never one whose node is lost.
// {"<gpu id>": "node/gpuN"} for the nodes' devices of this session.
nlohmann::json manager_state::device_labels() const {
  auto j = nlohmann::json::object();
  for (const auto& [id, d] : remotes_) j[std::to_string(id)] = label_of(id);
  return j;
}

// program.db names the node of every gpu_id this run ever used: this session's node devices are
// merged into what earlier sessions stored (a resumed run's ids may name other nodes' devices).
void manager_state::save_device_labels() {
  auto stored = nlohmann::json::object();
  if (auto before = db_->get_state(store::state_key::device_labels)) {
    auto parsed = nlohmann::json::parse(*before, nullptr, false);
    if (parsed.is_object()) stored = parsed;
  }
  stored.update(device_labels());
  db_->set_state_json(store::state_key::device_labels, stored);
}

size_t manager_state::least_loaded() const {
  size_t k = workers_.size();
  for (size_t i = 0; i < workers_.size(); ++i)
    if (!workers_[i].lost && (k == workers_.size() || workers_[i].inflight < workers_[k].inflight)) k = i;
  return k == workers_.size() ? 0 : k;
}

void manager_state::dispatch(candidate_spec spec) { dispatch_to(least_loaded(), std::move(spec)); }

void manager_state::dispatch_to(size_t k, candidate_spec spec) {
  auto& w = workers_[k];
  ++w.inflight;
  spec.worker_id = static_cast<int>(k);
  spec.eager_ms = eager_;
  spec.num_bottlenecks = ledger_->strategy().directions_needed();
  spec.recent_attempts = db_->list_attempts(5);
  spec.recent_reflexions = db_->list_reflexions(5);
  // user_test "best": the candidate runs test.py when it beats the best known now (a later best only
  // lowers the bar, so nothing that can become the best skips the test).
  spec.best_ms = best_ms_now();
  if (auto it = analysis_.find(spec.parent_id); it != analysis_.end()) spec.baseline = it->second;
  inflight_[spec.id] = {static_cast<int>(k), spec, std::nullopt};
  store::program_update u;
  u.worker = static_cast<int>(k);
  u.gpu_id = w.device_id;
  db_->update_program(spec.id, u);
  nlohmann::json start = {{"candidate_id", spec.id}, {"parent_id", spec.parent_id}, {"round", spec.round},
                          {"gpu_id", w.device_id}, {"slot", static_cast<int>(inflight_.size())},
                          {"direction", spec.bottleneck_id}};
  if (spec.tuned()) start["tune"] = spec.tune_label;
  emit(event_kind::candidate_start, std::move(start));
  // The gpu worker enforces candidate_timeout_s (and kills the candidate); this request's own timeout
  // is only a backstop for a worker that stopped answering.
  self_->request(w.actor, seconds_ms(ctx_->cfg.candidate_timeout_s + 120.0), spec)
      .then([this](const candidate_result& res) { on_result(res); },
            [this, spec](caf::error& err) {
              // Anything but a timeout means the worker died (CAF answers its pending requests with
              // the exit reason before the down_msg arrives). The down handler records those
              // candidates and respawns the worker first, so nothing goes to the dead one.
              if (err != caf::sec::request_timeout) return;
              on_result(ended_without_result(
                  spec, -1, failure_kind::timeout,
                  fmt::format("candidate exceeded candidate_timeout_s={}", ctx_->cfg.candidate_timeout_s)));
            });
}

// The devices of this process read it when they decide whether a candidate runs test.py.
void manager_state::publish_best() { ctx_->recorded_best_ms->store(best_ms_now()); }

// The best time known now: the strategy's best or a faster result of the current round, else the
// starting kernel's.
double manager_state::best_ms_now() const {
  auto b = ledger_->best();
  return b && is_measured(b->time_ms) ? b->time_ms : initial_ > 0 ? initial_ : not_measured;
}

// ---- results ---------------------------------------------------------------------------------------

// A candidate is measured and about to reflect: recorded now, exactly as its result would be, while
// its pipeline keeps its slot until the reflexion comes back (on_result).
void manager_state::on_measured(const candidate_measured& m) {
  if (interrupted_by_ != 0) return;  // stays pending: --resume runs it again
  auto it = inflight_.find(m.result.candidate_id);
  if (it == inflight_.end() || it->second.measured) return;  // already ended, or already recorded
  it->second.measured = m.result;
  const candidate_spec spec = it->second.spec;
  const auto& w = workers_[static_cast<size_t>(it->second.worker)];
  device_s_ += m.result.device_s;
  user_test_s_ += m.result.user_test_s;
  llm_s_ += m.result.llm_s;
  save_session();
  record(m.result, spec, w, true);
}

// The end of a pipeline: its slot is free. A candidate recorded before its reflexion only gets the
// reflexion attached (none when it timed out or was lost in the meantime); any other is recorded now.
void manager_state::on_result(const candidate_result& res) {
  if (interrupted_by_ != 0) return;  // stays pending: --resume runs it again
  auto it = inflight_.find(res.candidate_id);
  if (it == inflight_.end()) return;  // already recorded (its worker went down first)
  auto& w = workers_[static_cast<size_t>(it->second.worker)];
  --w.inflight;
  const candidate_spec spec = it->second.spec;
  const auto measured = std::move(it->second.measured);
  inflight_.erase(it);
  if (measured) {
    close_recorded(res, *measured, spec, w);
    return after_pipeline();
  }
  device_s_ += res.device_s;
  user_test_s_ += res.user_test_s;
  llm_s_ += res.llm_s;
  save_session();
  // A variant asks no LLM: it says nothing about how many pipelines keep the device fed.
  if (!spec.tuned()) size_pipelines(res.llm_s, res.device_s - res.user_test_s);
  record(res, spec, w, false);
}

// What a result decides: the search's rules (duplicate, new best, divergence, whether the strategy
// sees it), program.db, the events, and what runs next.
void manager_state::record(const candidate_result& res, const candidate_spec& spec, const worker_slot& w,
                           bool reflexion_pending) {
  const auto j = ledger_->record({res.candidate_id, res.ok, res.time_ms, res.code, res.code_hash,
                                  res.failure_cause, res.error});
  if (j.new_best) publish_best();
  commit_result(res, spec, w, j);
  if (j.new_best) roofline_stop(res.profile, res.candidate_id);
  emit_result(res, spec, w, j, reflexion_pending);
  if (finished_) return;
  if (ending_) return finish(ending_->success, ending_->error);
  if (ledger_->async()) {
    if (j.fed) db_->set_state(store::state_key::strategy_state, ledger_->strategy_state().dump());
    return refill();
  }
  if (ledger_->round_done()) return end_round();
  pump();
}

// A recorded candidate's pipeline ended: its reflexion joins program.db's history, its remaining
// time (the reflexion's LLM wait) is counted, and `candidate_end` says the slot is free.
void manager_state::close_recorded(const candidate_result& res, const candidate_result& measured,
                                   const candidate_spec& spec, const worker_slot& w) {
  const double more_device_s = std::max(0.0, res.device_s - measured.device_s);
  const double more_llm_s = std::max(0.0, res.llm_s - measured.llm_s);
  device_s_ += more_device_s;
  user_test_s_ += std::max(0.0, res.user_test_s - measured.user_test_s);
  llm_s_ += more_llm_s;
  save_session();
  size_pipelines(measured.llm_s + more_llm_s,
                 measured.device_s + more_device_s - std::max(res.user_test_s, measured.user_test_s));
  for (auto r : res.reflexion) {
    r.program_id = res.candidate_id;
    r.worker_id = spec.worker_id;
    r.round_num = spec.round;
    db_->insert_reflexion(r);
  }
  // A result of its own is ok (a reflexion never fails a candidate); one made for it says why it ended.
  emit(event_kind::candidate_end, {{"candidate_id", res.candidate_id}, {"round", spec.round}, {"gpu_id", w.device_id},
                                   {"reflexion", !res.reflexion.empty()}, {"device_s", more_device_s},
                                   {"llm_s", more_llm_s}, {"error", res.ok ? "" : res.error.substr(0, 500)}});
}

// A slot is free: the next candidate goes out, or the run ends when it was waiting for this one.
void manager_state::after_pipeline() {
  if (finished_) return;
  if (ending_) return finish(ending_->success, ending_->error);
  pump();
}

// num_workers: auto sizes the pipelines from a whole pipeline's LLM and device time.
void manager_state::size_pipelines(double llm_s, double device_s) {
  if (!meter_) return;
  // test.py runs only for would-be bests (most of the first candidates, few later): sizing the
  // pipelines by them starved the device on the H200 (4 pipelines for 20 s LLM replies), so the
  // caller leaves it out of device_s.
  meter_->record(llm_s, device_s);
  resize_pipelines();
}

// The first generation's pipelines, sized before any candidate has finished: a candidate waits for
// two LLM replies (its code, then its reflexion), each about as long as the starting kernel's
// analysis reply (`analysis_llm_s`), and costs about the starting kernel's evaluation on the device.
// Until two candidates are measured, `auto` otherwise stays at its floor of 4: on noop devices with
// 5 s replies (benchmarks/busy_shape.py) the first 4 candidates ran alone for 10 s and the other 44
// of the first generation waited.
void manager_state::prime_pipelines(double analysis_llm_s) {
  if (!meter_ || meter_->samples() > 0 || !(analysis_llm_s > 0) || !(initial_device_s_ > 0)) return;
  meter_->prime(2.0 * analysis_llm_s, initial_device_s_);
  resize_pipelines();
}

void manager_state::resize_pipelines() {
  if (const int n = meter_->next(slots_); n != slots_) {
    slots_ = n;
    emit(event_kind::concurrency, {{"num_workers", n}, {"reason", meter_->reason()}});
  }
}

void manager_state::commit_result(const candidate_result& res, const candidate_spec& spec, const worker_slot& w,
                                  const search::judgement& j) {
  store::program_update u;
  u.code = res.code;
  u.model = res.model.empty() ? spec.model : res.model;
  if (!res.bottleneck.empty()) u.bottleneck = res.bottleneck;
  u.analysis_mode = to_string(w.mode);
  u.code_hash = j.code_hash;
  if (j.ok) {
    u.status = store::program_status::verified;
    u.time_ms = res.time_ms;
    u.floor_pct = measured_or_none(res.floor_pct);
    if (initial_ > 0) u.speedup = initial_ / res.time_ms;
  } else {
    u.status = store::program_status::failed;
    u.failure_cause = to_string(j.failure_cause.value_or(failure_kind::unknown));
    u.error = j.error;
    if (j.failure_cause == failure_kind::duplicate && is_measured(res.time_ms)) u.time_ms = res.time_ms;
  }
  if (j.ok && res.profile && res.profile->roofline) {
    const auto& rl = *res.profile->roofline;
    u.compute_sol_pct = rl.compute_sol_pct;
    u.memory_sol_pct = rl.memory_sol_pct;
    u.sol_pct = rl.efficiency_pct;
  }
  db_->update_program(res.candidate_id, u);
  if (j.ok && res.profile) keep_profile(res.candidate_id, *res.profile);
  if (j.diverged) db_->set_state_json(store::state_key::diverged, nlohmann::json(ledger_->diverged()));
  for (auto a : res.attempt) {
    a.program_id = res.candidate_id;
    a.worker_id = spec.worker_id;
    a.round_num = spec.round;
    db_->insert_attempt(a);
  }
  for (auto r : res.reflexion) {
    r.program_id = res.candidate_id;
    r.worker_id = spec.worker_id;
    r.round_num = spec.round;
    db_->insert_reflexion(r);
  }
  if (j.ok && is_measured(res.time_spread_pct)) spreads_[res.candidate_id] = res.time_spread_pct;
}

void manager_state::emit_result(const candidate_result& res, const candidate_spec& spec, const worker_slot& w,
                                const search::judgement& j, bool reflexion_pending) {
  if (j.diverged)
    emit(event_kind::note, {{"what", "diverged"}, {"candidate_id", res.candidate_id}, {"time_ms", res.time_ms},
                  {"parent_time_ms", spec.parent_time_ms}, {"divergence_threshold", ctx_->cfg.divergence_threshold}});
  emit(event_kind::candidate_result,
       {{"candidate_id", res.candidate_id}, {"parent_id", res.parent_id}, {"round", spec.round},
        {"gpu_id", w.device_id}, {"ok", j.ok}, {"time_ms", j.ok ? nlohmann::json(res.time_ms) : nlohmann::json(nullptr)},
        {"failure_cause", j.ok ? "" : to_string(j.failure_cause.value_or(failure_kind::unknown))}, {"error", j.ok ? "" : j.error.substr(0, 500)},
        {"best_ms", num_or_null(j.best_ms)}, {"new_best", j.new_best}, {"device_s", res.device_s},
        {"user_test_s", res.user_test_s},
        {"llm_s", res.llm_s}, {"diverged", j.diverged}, {"reflexion_pending", reflexion_pending},
        {"spread_pct", j.ok && is_measured(res.time_spread_pct) ? nlohmann::json(res.time_spread_pct)
                                                                : nlohmann::json(nullptr)}});
}

// Roofline stop (SPEC §6.1, §14 A.29-A.30): only a new best at its roofline, and only when the
// analyzer's config says early_stop. `prof` is the new best's profile (its SOL profile, or under
// `profile: parents` the one taken when its round ended or when it was expanded).
void manager_state::roofline_stop(const std::optional<kernel_profile>& prof, const std::string& id) {
  if (!stop_rule_ || stop_requested_ || !prof || !prof->roofline) return;
  try {
    const roofline_result& rr = *prof->roofline;
    auto d = stop_rule_->should_stop(rr);
    if (d.stop && stop_rule_->config().early_stop && rr.at_roofline) {
      stop_requested_ = true;
      stop_reason_ = d.reason;
      emit(event_kind::note, {{"what", "roofline stop"}, {"candidate_id", id}, {"reason", d.reason}});
    }
  } catch (const std::exception& e) {
    emit(event_kind::error, {{"what", "roofline of the new best could not be read"}, {"reason", e.what()}});
  }
}

// A kept kernel's profile: the analyses, duplicates and the summary reuse it; program.db keeps it for
// --resume.
void manager_state::keep_profile(const std::string& id, const kernel_profile& prof) {
  profiles_[id] = prof;
  db_->set_state(std::string{store::state_key::profile_prefix} + id, nlohmann::json(prof).dump());
}

// A candidate is about to be profiled: a duplicate is recognised first, and a new hash is claimed,
// so that an identical sibling finishing later is the duplicate.
dedup_answer manager_state::on_dedup(const dedup_query& q) {
  dedup_answer a;
  a.duplicate_of = ledger_->duplicate_of(q.code_hash, q.candidate_id);
  if (a.duplicate_of.empty())
    ledger_->claim(q.code_hash, q.candidate_id);
  else if (auto it = profiles_.find(a.duplicate_of); it != profiles_.end())
    a.profile = it->second;
  return a;
}

// ---- supervision -----------------------------------------------------------------------------------

void manager_state::spawn_worker(size_t k) {
  auto& w = workers_[k];
  auto r = remotes_.find(w.device_id);
  w.actor = make_worker_(self_, static_cast<int>(k), w.device_id, llm_,
                         r == remotes_.end() ? device_actor_type{} : r->second.handle);
  self_->monitor(w.actor);
  if (w.mode == analysis_mode::synthetic) self_->send(w.actor, mode_atom::value, analysis_mode::synthetic);
}

// A gpu worker died: its in-flight candidates are recorded as `actor_down` after a fresh worker took
// its place, so nothing is sent to the dead one.
void manager_state::on_worker_down(const caf::down_msg& dm) {
  for (size_t k = 0; k < workers_.size(); ++k) {
    if (workers_[k].actor.address() != dm.source) continue;
    if (finished_) return;
    if (remotes_.count(workers_[k].device_id)) return on_node_lost(k, dm.reason);
    emit(event_kind::error, {{"what", "gpu worker down"}, {"gpu_id", workers_[k].device_id}, {"reason", to_string(dm.reason)}});
    std::vector<candidate_result> lost;
    for (const auto& [id, c] : inflight_) {
      if (c.worker != static_cast<int>(k)) continue;
      lost.push_back(ended_without_result(c.spec, workers_[k].device_id, failure_kind::actor_down,
                                          "gpu worker failed: " + to_string(dm.reason)));
    }
    ++workers_[k].restarts;
    spawn_worker(k);
    emit(event_kind::note, {{"what", "gpu worker respawned"}, {"gpu_id", workers_[k].device_id},
                  {"restarts", workers_[k].restarts}});
    for (const auto& r : lost) on_result(r);
    return;
  }
}

// A node's device is gone with its node (killed, or silent past the link's timeout): it is not
// respawned; its in-flight candidates go back to the queue for the devices that are left (they keep
// their ids and plans), or fail with cause node_down when none is left. A candidate recorded before
// its reflexion stays as recorded: only its reflexion is lost with the node.
void manager_state::on_node_lost(size_t k, const caf::error& reason) {
  auto& w = workers_[k];
  w.lost = true;
  const auto label = label_of(w.device_id);
  std::vector<candidate_spec> again;
  std::vector<inflight_candidate> recorded;
  for (auto it = inflight_.begin(); it != inflight_.end();) {
    if (it->second.worker != static_cast<int>(k)) {
      ++it;
      continue;
    }
    if (it->second.measured)
      recorded.push_back(std::move(it->second));
    else
      again.push_back(it->second.spec);
    it = inflight_.erase(it);
  }
  w.inflight = 0;
  for (const auto& c : recorded)
    close_recorded(ended_without_result(c.spec, w.device_id, failure_kind::node_down,
                                        label + " was lost (" + to_string(reason) + ") during the reflexion"),
                   *c.measured, c.spec, w);
  const bool any_left = std::any_of(workers_.begin(), workers_.end(), [](const worker_slot& s) { return !s.lost; });
  emit(event_kind::node_down, {{"device", label}, {"gpu_id", w.device_id}, {"reason", to_string(reason)},
                               {"requeued", any_left ? again.size() : 0}, {"devices_left", std::count_if(
                                   workers_.begin(), workers_.end(), [](const worker_slot& s) { return !s.lost; })}});
  if (!any_left) {
    // Recorded here, not through on_result: no round may close and plan onto a lost device.
    for (const auto& spec : again) {
      const auto r = ended_without_result(spec, w.device_id, failure_kind::node_down,
                                          label + " was lost (" + to_string(reason) + ") and no device is left");
      const auto j = ledger_->record({r.candidate_id, false, not_measured, "", "", r.failure_cause, r.error});
      commit_result(r, spec, w, j);
      emit_result(r, spec, w, j);
    }
    if (finished_) return;
    // The search was over and every candidate recorded: the run ends as it would have.
    if (ending_ && again.empty()) return finish(ending_->success, ending_->error);
    finish(false, "every device is gone: the last one was " + label + " (" + to_string(reason) + ")");
    return;
  }
  for (auto it = again.rbegin(); it != again.rend(); ++it) queue_.push_front(*it);
  after_pipeline();
}

std::string manager_state::label_of(int device_id) const {
  auto it = remotes_.find(device_id);
  return it == remotes_.end() ? "gpu" + std::to_string(device_id)
                              : it->second.node + "/gpu" + std::to_string(it->second.node_device_id);
}

// A node's devices joined (late, or again after the node was lost): new slots with new ids, and the
// queue goes to them at once.
void manager_state::on_node_joined(const node_joined& j) {
  if (finished_) return;
  for (const auto& d : j.devices) {
    const int id = next_remote_id_++;
    remotes_[id] = remote_device{id, j.node, d.device_id, d.name, d.handle};
    workers_.push_back({caf::actor{}, id, 0, 0, analysis_mode::profiled, "", false});
    spawn_worker(workers_.size() - 1);
    emit(event_kind::node_up, {{"device", label_of(id)}, {"gpu_id", id}, {"name", d.name}, {"node", j.node},
                               {"devices", std::count_if(workers_.begin(), workers_.end(),
                                                         [](const worker_slot& s) { return !s.lost; })}});
  }
  save_device_labels();
  pump();
}

// Supervision: a profile failed on one device. On ROCm that device's session turns synthetic for the
// rest of the run (SPEC §7.4, §14 A.22-A.25): decided by the component's platform.
void manager_state::on_profiling_failed(const profiling_failed& pf) {
  ++profiling_failures_;
  emit(event_kind::profiling_failed, {{"gpu_id", pf.gpu_id}, {"candidate_id", pf.candidate_id}, {"platform", pf.platform},
                            {"invocation", pf.invocation}, {"reason", pf.reason.substr(0, 1000)},
                            {"output_tail", pf.output_tail.substr(0, 2000)}});
  if (!pf.turned_synthetic) return;
  for (auto& w : workers_) {
    if (w.device_id != pf.gpu_id || w.mode == analysis_mode::synthetic) continue;
    w.mode = analysis_mode::synthetic;
    w.synthetic_reason = pf.invocation.empty() ? pf.reason : pf.invocation + ": " + pf.reason;
    nlohmann::json change{{"gpu_id", w.device_id}, {"mode", "synthetic"}, {"reason", w.synthetic_reason.substr(0, 500)},
                          {"invocation", pf.invocation}, {"candidate_id", pf.candidate_id}};
    mode_changes_.push_back(change);
    emit(event_kind::mode_change, change);
    save_modes();
  }
}

// Ctrl-C / SIGTERM: nothing new starts and no result is recorded from now on (what is in flight stays
// pending in program.db, so --resume runs it again). The workers end their candidates before the
// answer goes out; only then does the runtime kill the children.
caf::result<bool> manager_state::interrupt(int sig) {
  if (finished_) return false;
  interrupted_by_ = sig;
  emit(event_kind::interrupted, {{"signal", stop_signal_name(sig)}, {"in_flight", inflight_.size()}, {"queued", queue_.size()}});
  auto rp = self_->make_response_promise<bool>();
  auto left = std::make_shared<size_t>(workers_.size());
  auto done = [=]() mutable {
    if (*left > 0 && --*left > 0) return;
    rp.deliver(true);
  };
  finish_now(false, fmt::format("interrupted by {}", stop_signal_name(sig)));
  if (workers_.empty()) rp.deliver(true);
  for (auto& w : workers_)
    self_->request(w.actor, std::chrono::seconds(2), interrupt_atom::value, sig)
        .then([=](bool) mutable { done(); }, [=](caf::error&) mutable { done(); });
  return rp;
}

// ---- the end ---------------------------------------------------------------------------------------

// The answer is always the fastest verified, measured kernel of the whole run (program.db), not
// whatever the strategy happens to hold: the same rule summary.json states (search::answer_of), over
// the one row program.db ranks first (not every program and its code, at every round's end).
std::optional<program_entry> manager_state::fastest_verified() {
  return search::answer_of(db_->top_k_verified(1), ledger_->strategy().best());
}

// One profile of a kept kernel on the first device that still profiles (a ROCm device in synthetic
// mode never profiles again; `profile: never` never profiles), stored as the kernel's profile.
// Returns false when none is taken; otherwise `then` gets the profile (null when it failed).
bool manager_state::profile_kernel(const program_entry& k, const std::string& label, const std::string& why,
                                   std::function<void(const std::optional<kernel_profile>&)> then) {
  const std::string pp = ctx_->cfg.platform.profiler;
  if (ctx_->cfg.profile == "never" || (pp != "nvidia" && pp != "rocm")) return false;
  auto w = std::find_if(workers_.begin(), workers_.end(),
                        [](const worker_slot& s) { return s.mode != analysis_mode::synthetic && !s.lost; });
  if (w == workers_.end()) return false;
  profile p;
  p.candidate_id = k.id;
  p.code = k.code;
  p.label = label;
  p.work_dir = (run_path_ / "candidates" / k.id).string();
  p.profile_id = k.id + "_" + label;
  emit(event_kind::note, {{"what", why}, {"program_id", k.id}});
  const auto id = k.id;
  self_->request(w->actor, seconds_ms(ctx_->cfg.candidate_timeout_s), p)
      .then(
          [this, id, then](const profile_result& pr) {
            if (finished_) return;
            device_s_ += pr.wall_s;
            save_session();
            std::optional<kernel_profile> prof;
            if (pr.available && pr.ok) {
              prof = pr.profile;
              keep_profile(id, pr.profile);
            }
            then(prof);
          },
          [then](caf::error&) { then(std::nullopt); });
  return true;
}

// The search plans nothing more. A failed run ends at once; a successful one ends when the pipelines
// still in flight are done (recorded candidates waiting for their reflexions) and, where the best
// kernel has no profile yet (none was taken, or its SOL profile failed), its final profile (SPEC §1.3
// step 5, §14 A.27). That profile starts as soon as every pipeline in flight is recorded, since the
// best can no longer change then: alongside the last reflexions, not after them. Called again at the
// end of each pipeline while the run waits.
void manager_state::finish(bool success, const std::string& error) {
  if (finished_) return;
  if (!success) return finish_now(success, error);
  ending_ = pending_end{success, error};
  run_start_checks();  // a run that ends before any analysis asked its LLM still checks its start
  const bool settled = std::all_of(inflight_.begin(), inflight_.end(),
                                   [](const auto& c) { return c.second.measured.has_value(); });
  if (settled && !final_profile_requested_) {
    final_profile_requested_ = true;
    auto best = fastest_verified();
    if (best && best->id != "initial" && !profiles_.count(best->id) &&
        profile_kernel(*best, "final", "final profile of the best kernel",
                       [this](const std::optional<kernel_profile>&) {
                         final_profile_running_ = false;
                         end_when_settled();
                       }))
      final_profile_running_ = true;
  }
  end_when_settled();
}

void manager_state::end_when_settled() {
  if (finished_ || !ending_ || final_profile_running_ || !inflight_.empty() || checks_ == start_checks::running) return;
  finish_now(ending_->success, ending_->error);
}

// What the run was, for summary.json.
search::run_identity manager_state::identity() const {
  search::run_identity id;
  id.strategy = ctx_->cfg.name;
  id.search = ledger_->strategy().name();
  id.schedule = ledger_->async() ? "async" : "rounds";
  id.num_workers = slots_;
  id.num_workers_mode = meter_ ? "auto" : "fixed";
  if (meter_) id.num_workers_reason = meter_->reason();
  id.kernel_dir = ctx_->kernel_dir;
  id.run_dir = ctx_->run_path;
  id.run_id = run_path_.filename().string();
  id.vendor = ctx_->vendor;
  // Every device the session used: those of the start and those that joined later (node_up).
  for (const auto& w : workers_) id.devices.push_back(w.device_id);
  if (id.devices.empty()) id.devices = ctx_->device_ids;
  id.gpu_name = ctx_->gpu_name;
  id.platform = ctx_->cfg.platform.uniform();
  id.profiler_platform = ctx_->cfg.platform.profiler;
  id.resumed = resumed_;
  id.version = KAGENT_VERSION;
  id.rounds = ledger_->round();
  id.resume_command = "kagent-actors --resume " + ctx_->run_path;
  return id;
}

// What only the manager knows about the run, beside program.db's records, for summarize().
search::summary_facts manager_state::facts(bool success, const std::string& error) const {
  search::summary_facts f;
  f.programs = db_->list_programs();
  f.llm_usage = db_->llm_usage();
  f.provider_of[ctx_->llm_chosen.model] = ctx_->llm_chosen.provider;
  for (const auto& m : ctx_->llm_models) f.provider_of[m.model] = m.provider;
  f.default_provider = ctx_->llm_chosen.provider;
  f.sessions = all_sessions();
  f.session_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  f.ok = success;
  f.error = error;
  if (interrupted_by_ != 0) f.interrupted_by = stop_signal_name(interrupted_by_);
  f.diverged = ledger_->diverged();
  f.spreads = spreads_;
  f.strategy_best = ledger_->strategy().best();
  f.initial_ms = initial_;
  f.eager_ms = eager_;
  f.compile_ms = compile_;
  f.references_cached_at = references_cached_at_;
  return f;
}

void manager_state::finish_now(bool success, const std::string& error) {
  if (finished_) return;
  finished_ = true;
  store::run_directory rd = store::run_directory::open_existing(run_path_);
  const auto f = facts(success, error);
  auto sum = search::summarize(identity(), f);
  // An interrupted run still names its best so far (and writes it): hours of search are not lost.
  if (sum.best) {
    rd.write_best_kernel(sum.best->code);
    sum.best_kernel_path = rd.best_kernel_path().string();
    if (auto it = profiles_.find(sum.best->id); it != profiles_.end() && it->second.roofline)
      sum.best_roofline = *it->second.roofline;
  }
  if (stop_requested_) sum.early_stop_reason = stop_reason_;
  for (const auto& w : workers_)
    if (w.mode == analysis_mode::synthetic) sum.synthetic_devices.push_back({{"gpu_id", w.device_id}, {"reason", w.synthetic_reason}});
  sum.profiling_failures = profiling_failures_;
  sum.mode_changes = mode_changes_;
  const auto s = sum.to_json();
  try {
    db_->set_state(store::state_key::sessions, f.sessions.dump());
  } catch (const std::exception&) {
  }
  rd.write_summary(s);
  db_->set_state(store::state_key::status, s["run_state"].get<std::string>());
  emit(event_kind::run_end, {{"success", s["success"]}, {"best_ms", s["best_ms"]}, {"error", sum.error},
                   {"run_state", s["run_state"]}});
  const int code = interrupted_by_ != 0 ? 130 : sum.success ? 0 : 1;
  run_finished end{code, s};
  self_->request(reporter_, std::chrono::seconds(60), end)
      .then([this, end](caf::unit_t) { shut_down(end); }, [this, end](caf::error&) { shut_down(end); });
}

// A normal exit does not take linked or monitored actors with it in CAF 0.17: every child is shut down
// explicitly, or the actor system would wait for them forever.
void manager_state::shut_down(const run_finished& end) {
  for (auto& [pid, a] : analysts_) self_->send_exit(a, caf::exit_reason::user_shutdown);
  for (auto& w : workers_) self_->send_exit(w.actor, caf::exit_reason::user_shutdown);
  for (auto& l : node_links_) self_->send_exit(l, caf::exit_reason::user_shutdown);
  self_->send_exit(llm_, caf::exit_reason::user_shutdown);
  self_->send_exit(reporter_, caf::exit_reason::user_shutdown);
  self_->send(waiter_, end);
  self_->quit();
}

// ---- bookkeeping -----------------------------------------------------------------------------------

void manager_state::emit(event_kind kind, nlohmann::json payload) {
  self_->send(reporter_, run_event{kind, std::move(payload)});
}

// Every session of the run, this one included (its wall time so far).
nlohmann::json manager_state::all_sessions() const {
  nlohmann::json all = prior_sessions_;
  all.push_back({{"started", session_started_},
                 {"wall_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count()},
                 {"devices", static_cast<int>(std::max<size_t>(1, workers_.size()))},
                 {"device_s", device_s_}, {"user_test_s", user_test_s_}});
  return all;
}

void manager_state::save_session() {
  try {
    db_->set_state(store::state_key::sessions, all_sessions().dump());
  } catch (const std::exception&) {
    // Bookkeeping only: a failed write costs the next session's totals, never the run.
  }
}

void manager_state::save_modes() {
  nlohmann::json m = nlohmann::json::object();
  for (const auto& w : workers_) m[std::to_string(w.device_id)] = to_string(w.mode);
  db_->set_state_json(store::state_key::analysis_mode, m);
}

nlohmann::json manager_state::llm_models_json() const {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& m : ctx_->llm_models)
    a.push_back({{"provider", m.provider}, {"model", m.model}, {"endpoint", m.endpoint}, {"key_env", m.key_env}});
  return a;
}

} // namespace kagent
