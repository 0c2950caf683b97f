// manager: root supervisor of a run. Owns the program DB, the strategy and the baseline cache; plans
// candidates round by round (or continuously in the async schedule), hands them to gpu workers
// (least loaded first, at most num_workers in flight), supervises workers and profilers, and writes
// the final artifacts. Every decision that matters for --resume is committed to program.db first.
#include <fmt/format.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "actors/actors.hpp"
#include "platform/common/stop.hpp"
#include "platform/gpu/specs.hpp"
#include "platform/search/concurrency.hpp"
#include "platform/search/ledger.hpp"
#include "platform/search/summary.hpp"
#include "platform/nvidia/nvidia_roofline.hpp"
#include "platform/store/program_db.hpp"
#include "platform/store/run_directory.hpp"
#include "platform/store/sessions.hpp"
#include "platform/store/util.hpp"

namespace fs = std::filesystem;

namespace kagent {

namespace {

struct worker_slot {
  caf::actor actor;
  int device_id = 0;
  int inflight = 0;
  int restarts = 0;
  bool synthetic = false;
  std::string synthetic_reason;
};

struct inflight_candidate {
  int worker = 0;
  candidate_spec spec;
};

struct manager_state {
  std::unique_ptr<store::program_db> db;
  std::unique_ptr<search::ledger> ledger;  ///< the search's rules: plans, verdicts, rounds, resume
  std::unique_ptr<roofline_analyzer> stop_rule;  ///< run-level roofline stop check (new bests only)
  caf::actor reporter, llm;
  std::vector<worker_slot> workers;
  std::deque<candidate_spec> queue;                   ///< planned, waiting for a slot or an analysis
  std::map<std::string, inflight_candidate> inflight;
  std::map<std::string, nlohmann::json> analysis;     ///< parent id -> baseline analysis
  std::set<std::string> analyzing;
  std::map<std::string, std::string> profiles;        ///< program id -> its SOL profile JSON
  std::map<std::string, double> spreads;              ///< candidate -> IQR of its timed calls / median, in %
  std::string default_model;
  int slots = 1;
  double eager = -1, compile = -1, initial = -1;
  bool finished = false;
  int interrupted_by = 0;  ///< the signal that interrupted the run (0: none)
  /// Parent analyses in flight: their requests wait without a timeout, so the end of the run ends them.
  std::map<std::string, caf::actor> analysts;
  bool resumed = false;
  bool stop_requested = false;
  bool final_profile_requested = false;
  std::string stop_reason;
  int profiling_failures = 0;
  nlohmann::json mode_changes = nlohmann::json::array();
  double device_s = 0, llm_s = 0;
  std::optional<search::concurrency_meter> meter;  ///< num_workers: auto
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  /// Earlier sessions of this run (--resume), as program.db's run_state `sessions` has them; this
  /// session is appended whenever it is saved, so the totals are true across kill -9 and resume.
  nlohmann::json prior_sessions = nlohmann::json::array();
  std::string session_started = store::iso_utc_now();
};

nlohmann::json num_or_null(double v) { return is_measured(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

} // namespace

caf::behavior manager_actor(caf::event_based_actor* self, context_ptr ctx, caf::actor waiter) {
  install_exception_handler(self, "manager");
  auto st = std::make_shared<manager_state>();
  const auto run_path = fs::path(ctx->run_path);
  st->db = std::make_unique<store::program_db>(store::program_db::open(run_path / "program.db"));
  st->default_model = ctx->cfg.llm.model.empty() ? ctx->cfg.openai_model : ctx->cfg.llm.model;
  st->ledger = std::make_unique<search::ledger>(
      make_strategy(ctx->cfg, st->default_model),
      search::ledger::rules{ctx->cfg.max_rounds, ctx->cfg.divergence_threshold, ctx->cfg.strategy_cfg.schedule == "async"});
  st->slots = std::max(1, ctx->cfg.num_workers);
  {
    // The roofline stop rule needs the vendor of the roofline component and the device's peaks.
    const std::string rv = ctx->cfg.platform.roofline_analyzer;
    if (rv == "nvidia" || rv == "rocm") {
      try {
        st->stop_rule = make_roofline_analyzer(rv, ctx->cfg.roofline,
                                               ctx->gpu_name.empty() ? std::nullopt : find_gpu_specs(ctx->gpu_name));
      } catch (const std::exception&) {
        st->stop_rule.reset();  // no specs for this device: no stop rule, the search runs its rounds
      }
    }
  }
  st->reporter = self->spawn<caf::linked>(reporter_actor, ctx);
  st->llm = self->spawn<caf::linked>(llm_client_actor, ctx, caf::actor{self}, st->reporter);

  auto emit = [=](const std::string& type, const nlohmann::json& payload) {
    self->send(st->reporter, run_event{type, payload.dump()});
  };
  // Every session of the run, this one included (its wall time so far).
  auto all_sessions = [=] {
    nlohmann::json all = st->prior_sessions;
    all.push_back({{"started", st->session_started},
                   {"wall_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - st->t0).count()},
                   {"devices", static_cast<int>(std::max<size_t>(1, st->workers.size()))},
                   {"device_s", st->device_s}});
    return all;
  };
  auto save_session = [=] {
    try {
      st->db->set_state(store::state_key::sessions, all_sessions().dump());
    } catch (const std::exception&) {
      // Bookkeeping only: a failed write costs the next session's totals, never the run.
    }
  };

  auto spawn_worker = [=](size_t k) {
    auto& w = st->workers[k];
    w.actor = self->spawn<caf::monitored>(gpu_worker_actor, ctx, static_cast<int>(k), w.device_id, st->llm,
                                          caf::actor{self});
    if (w.synthetic) self->send(w.actor, mode_atom::value, std::string{"synthetic"});
  };
  for (size_t k = 0; k < ctx->device_ids.size(); ++k) {
    st->workers.push_back({caf::actor{}, ctx->device_ids[k], 0, 0, false, ""});
  }
  if (ctx->cfg.num_workers_auto)
    st->meter.emplace(search::concurrency_limits{static_cast<int>(std::max<size_t>(1, st->workers.size())),
                                                 st->slots, search::auto_pipeline_cap});

  auto least_loaded = [=]() -> size_t {
    size_t k = 0;
    for (size_t i = 1; i < st->workers.size(); ++i)
      if (st->workers[i].inflight < st->workers[k].inflight) k = i;
    return k;
  };

  auto save_modes = [=]() {
    nlohmann::json m = nlohmann::json::object();
    for (const auto& w : st->workers) m[std::to_string(w.device_id)] = w.synthetic ? "synthetic" : "profiled";
    st->db->set_state_json(store::state_key::analysis_mode, m);
  };

  // ---- the end ---------------------------------------------------------------------------------
  // The answer is always the fastest verified, measured kernel of the whole run (program.db), not
  // whatever the strategy happens to hold.
  auto to_entry = [](const store::program_record& p) {
    return program_entry{p.id, p.parent_id.value_or(""), p.code, p.time_ms.value_or(-1), p.round,
                         p.code_hash.value_or("")};
  };
  auto fastest_verified = [=]() -> std::optional<program_entry> {
    auto top = st->db->top_k_verified(1);
    if (top.empty()) return st->ledger->strategy().best();
    return to_entry(top.front());
  };

  auto finish_now = [=](bool success, const std::string& error) {
    if (st->finished) return;
    st->finished = true;
    store::run_directory rd = store::run_directory::open_existing(run_path);
    search::run_identity id;
    id.strategy = ctx->cfg.name;
    id.search = st->ledger->strategy().name();
    id.schedule = st->ledger->async() ? "async" : "rounds";
    id.num_workers = st->slots;
    id.num_workers_mode = st->meter ? "auto" : "fixed";
    if (st->meter) id.num_workers_reason = st->meter->reason();
    id.kernel_dir = ctx->kernel_dir;
    id.run_dir = ctx->run_path;
    id.run_id = run_path.filename().string();
    id.vendor = ctx->vendor;
    id.devices = ctx->device_ids;
    id.gpu_name = ctx->gpu_name;
    id.platform = ctx->cfg.platform.uniform();
    id.profiler_platform = ctx->cfg.platform.profiler;
    id.resumed = st->resumed;
    id.version = KAGENT_VERSION;
    id.rounds = st->ledger->round();
    id.resume_command = "kagent-actors --resume " + ctx->run_path;
    search::summary_facts f;
    f.programs = st->db->list_programs();
    f.llm_usage = st->db->llm_usage();
    f.provider_of[ctx->llm_chosen.model] = ctx->llm_chosen.provider;
    for (const auto& m : ctx->llm_models) f.provider_of[m.model] = m.provider;
    f.default_provider = ctx->llm_chosen.provider;
    f.sessions = all_sessions();
    f.session_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - st->t0).count();
    f.ok = success;
    f.error = error;
    if (st->interrupted_by != 0) f.interrupted_by = stop_signal_name(st->interrupted_by);
    f.diverged = st->ledger->diverged();
    f.spreads = st->spreads;
    f.strategy_best = st->ledger->strategy().best();
    f.initial_ms = st->initial;
    f.eager_ms = st->eager;
    f.compile_ms = st->compile;
    auto sum = search::summarize(id, f);
    // An interrupted run still names its best so far (and writes it): hours of search are not lost.
    if (sum.best) {
      rd.write_best_kernel(sum.best->code);
      sum.best_kernel_path = rd.best_kernel_path().string();
      if (auto it = st->profiles.find(sum.best->id); it != st->profiles.end()) {
        auto pj = nlohmann::json::parse(it->second, nullptr, false);
        if (pj.is_object() && pj.contains("roofline")) sum.best_roofline = pj["roofline"];
      }
    }
    if (st->stop_requested) sum.early_stop_reason = st->stop_reason;
    for (const auto& w : st->workers)
      if (w.synthetic) sum.synthetic_devices.push_back({{"gpu_id", w.device_id}, {"reason", w.synthetic_reason}});
    sum.profiling_failures = st->profiling_failures;
    sum.mode_changes = st->mode_changes;
    const auto s = sum.to_json();
    const std::string why = sum.error;
    const bool interrupted = st->interrupted_by != 0;
    try {
      st->db->set_state(store::state_key::sessions, f.sessions.dump());
    } catch (const std::exception&) {
    }
    rd.write_summary(s);
    st->db->set_state(store::state_key::status, s["run_state"].get<std::string>());
    emit("run_end", {{"success", s["success"]}, {"best_ms", s["best_ms"]}, {"error", why},
                     {"run_state", s["run_state"]}});
    const int code = interrupted ? 130 : s["success"].get<bool>() ? 0 : 1;
    // A normal exit does not take linked or monitored actors with it in CAF 0.17: shut every child
    // down explicitly, or the actor system would wait for them forever.
    auto shutdown = [=] {
      for (auto& [pid, a] : st->analysts) self->send_exit(a, caf::exit_reason::user_shutdown);
      for (auto& w : st->workers) self->send_exit(w.actor, caf::exit_reason::user_shutdown);
      self->send_exit(st->llm, caf::exit_reason::user_shutdown);
      self->send_exit(st->reporter, caf::exit_reason::user_shutdown);
      self->send(waiter, finish_atom::value, code, s.dump());
      self->quit();
    };
    self->request(st->reporter, std::chrono::seconds(60), finish_atom::value, s.dump())
        .then([=](caf::unit_t) { shutdown(); }, [=](caf::error&) { shutdown(); });
  };

  // The final profile of the best kernel (SPEC §1.3 step 5, §14 A.27): when its own SOL profile is
  // missing, profile it once more before the end, on a device that still profiles. On NVIDIA this
  // happens even if that SOL profile failed; a ROCm device in synthetic mode never profiles again.
  // One profile of a kept kernel on the first device that still profiles (a ROCm device in synthetic
  // mode never profiles again; `profile: never` never profiles), stored as the kernel's profile.
  // Returns false when none is taken; otherwise `then` gets the profile (null when it failed).
  auto profile_kernel = [=](const program_entry& k, const std::string& label, const std::string& why,
                            std::function<void(const nlohmann::json&)> then) {
    const std::string pp = ctx->cfg.platform.profiler;
    if (ctx->cfg.profile == "never" || (pp != "nvidia" && pp != "rocm")) return false;
    int w = -1;
    for (size_t i = 0; i < st->workers.size(); ++i)
      if (!st->workers[i].synthetic) {
        w = static_cast<int>(i);
        break;
      }
    if (w < 0) return false;
    profile p;
    p.candidate_id = k.id;
    p.code = k.code;
    p.label = label;
    p.work_dir = (run_path / "candidates" / k.id).string();
    p.profile_id = k.id + "_" + label;
    emit("note", {{"what", why}, {"program_id", k.id}});
    const auto id = k.id;
    self->request(st->workers[static_cast<size_t>(w)].actor,
                  std::chrono::milliseconds(static_cast<long>(ctx->cfg.candidate_timeout_s * 1000)), p)
        .then(
            [=](const profile_result& pr) {
              if (st->finished) return;
              st->device_s += pr.wall_s;
              save_session();
              nlohmann::json prof = nullptr;
              if (pr.available && pr.ok) {
                prof = profile_to_json(pr);
                st->profiles[id] = prof.dump();
                st->db->set_state(std::string{store::state_key::profile_prefix} + id, prof.dump());
              }
              then(prof);
            },
            [=](caf::error&) { then(nullptr); });
    return true;
  };

  // The final profile of the best kernel (SPEC §1.3 step 5, §14 A.27): when it has no profile yet
  // (none was taken, or its SOL profile failed), profile it once more before the end.
  auto finish = [=](bool success, const std::string& error) {
    if (st->finished) return;
    auto best = fastest_verified();
    const bool wants = success && best && best->id != "initial" && !st->profiles.count(best->id) &&
                       st->inflight.empty() && !st->final_profile_requested;
    if (wants) {
      st->final_profile_requested = true;
      if (profile_kernel(*best, "final", "final profile of the best kernel",
                         [=](const nlohmann::json&) { finish_now(success, error); }))
        return;
    }
    finish_now(success, error);
  };

  // ---- planning and dispatch -------------------------------------------------------------------
  auto pump = std::make_shared<std::function<void()>>();
  auto on_result = std::make_shared<std::function<void(const candidate_result&)>>();
  auto start_round = std::make_shared<std::function<void(int)>>();
  auto refill = std::make_shared<std::function<void()>>();

  self->attach_functor([pump, on_result, start_round, refill](const caf::error&) {  // break closure cycles
    *pump = nullptr;
    *on_result = nullptr;
    *start_round = nullptr;
    *refill = nullptr;
  });

  // A planned candidate: recorded as pending with its plan before anything runs, so that --resume
  // finds it again.
  auto spec_of = [=](const search::planned& plan) {
    candidate_spec spec;
    spec.id = plan.id;
    spec.parent_id = plan.parent.id;
    spec.round = plan.round;
    spec.bottleneck_id = plan.direction;
    spec.sample_idx = plan.sample;
    spec.model = plan.model;
    spec.parent_code = plan.parent.code;
    spec.parent_time_ms = plan.parent.time_ms;
    spec.work_dir = (run_path / "candidates" / spec.id).string();
    return spec;
  };
  auto commit_plan = [=](const search::planned& plan) {
    store::program_record rec;
    rec.id = plan.id;
    rec.parent_id = plan.parent.id;
    rec.round = plan.round;
    rec.status = store::program_status::pending;
    rec.model = plan.model;
    rec.bottleneck = fmt::format("direction {}", plan.direction);
    // A pending row without its plan (a kill between the two commits) is completed, not duplicated.
    if (!st->db->get_program(rec.id)) st->db->insert_program(rec);
    st->db->set_states({{std::string{store::state_key::spec_prefix} + plan.id, search::plan_to_json(plan).dump()},
                        {store::state_key::next_candidate, std::to_string(st->ledger->next_candidate())}});
    st->queue.push_back(spec_of(plan));
  };

  // Roofline stop (SPEC §6.1, §14 A.29-A.30): only a new best at its roofline, and only when the
  // analyzer's config says early_stop. `prof` is the new best's profile (its SOL profile, or under
  // `profile: parents` the one taken when its round ended or when it was expanded).
  auto roofline_stop = [=](const nlohmann::json& prof, const std::string& id) {
    if (!st->stop_rule || st->stop_requested || !prof.is_object() || !prof.contains("roofline") ||
        !prof["roofline"].is_object())
      return;
    try {
      roofline_result rr = prof["roofline"].get<roofline_result>();
      auto d = st->stop_rule->should_stop(rr);
      if (d.stop && st->stop_rule->config().early_stop && rr.at_roofline) {
        st->stop_requested = true;
        st->stop_reason = d.reason;
        emit("note", {{"what", "roofline stop"}, {"candidate_id", id}, {"reason", d.reason}});
      }
    } catch (const std::exception& e) {
      emit("error", {{"what", "roofline of the new best could not be read"}, {"reason", e.what()}});
    }
  };

  auto request_analysis = [=](const candidate_spec& spec) {
    const std::string pid = spec.parent_id;
    st->analyzing.insert(pid);
    if (pid == "initial") emit("initial_step", {{"step", "profiling and diagnosing the starting kernel"}});
    const size_t k = least_loaded();
    auto a = self->spawn(parent_analysis_actor, ctx, st->workers[k].actor, st->llm);
    st->analysts[pid] = a;
    analyze_parent req;
    req.parent_id = pid;
    req.code = spec.parent_code;
    req.time_ms = spec.parent_time_ms;
    req.num_bottlenecks = st->ledger->strategy().directions_needed();
    req.work_dir = (run_path / "baseline_profiles" / pid).string();
    req.model = spec.model;
    if (auto it = st->profiles.find(pid); it != st->profiles.end()) req.known_profile_json = it->second;
    emit("analysis_start", {{"parent_id", pid}, {"gpu_id", st->workers[k].device_id},
                            {"profile_reused", !req.known_profile_json.empty()}});
    const double budget = ctx->cfg.candidate_timeout_s;
    self->request(a, std::chrono::milliseconds(static_cast<long>(budget * 1000)), req)
        .then(
            [=](const parent_analysis& pa) {
              st->analysts.erase(pid);
              if (st->finished) return;  // interrupted: analysed again after --resume
              auto j = nlohmann::json::parse(pa.analysis_json, nullptr, false);
              if (j.is_discarded()) j = {{"profile", nullptr}, {"bottlenecks", nlohmann::json::array()}, {"source", "none"}};
              st->analysis[pid] = j;
              st->analyzing.erase(pid);
              st->device_s += pa.device_s;
              save_session();
              // The parent's baseline profile is its profile: the final-profile step reuses it.
              if (j.contains("profile") && j["profile"].is_object() && !st->profiles.count(pid)) {
                st->profiles[pid] = j["profile"].dump();
                // Under `profile: parents` this may be the first profile of the best kernel.
                if (auto best = fastest_verified(); best && best->id == pid) roofline_stop(j["profile"], pid);
              }
              st->db->set_state(std::string{store::state_key::analysis_prefix} + pid, j.dump());
              emit("analysis", {{"parent_id", pid}, {"source", j.value("source", "none")},
                                {"directions", j.contains("bottlenecks") ? j["bottlenecks"].size() : 0},
                                {"profile_failed", pa.profile_failed}, {"device_s", pa.device_s},
                                {"llm_s", pa.llm_s}});
              (*pump)();
            },
            [=](caf::error& err) {
              st->analysts.erase(pid);
              if (st->finished) return;
              // No analysis: the candidates still run, with the direction left to the model.
              nlohmann::json j{{"profile", nullptr}, {"bottlenecks", nlohmann::json::array()}, {"source", "none"},
                               {"error", to_string(err)}};
              st->analysis[pid] = j;
              st->analyzing.erase(pid);
              st->db->set_state(std::string{store::state_key::analysis_prefix} + pid, j.dump());
              emit("error", {{"what", "parent analysis failed"}, {"parent_id", pid}, {"reason", to_string(err)}});
              (*pump)();
            });
  };

  auto history_json = [=]() {
    nlohmann::json attempts = nlohmann::json::array(), reflexions = nlohmann::json::array();
    for (const auto& a : st->db->list_attempts(5)) attempts.push_back(store::to_json(a));
    for (const auto& r : st->db->list_reflexions(5)) reflexions.push_back(store::to_json(r));
    return nlohmann::json{{"attempts", attempts}, {"reflexions", reflexions}}.dump();
  };

  auto dispatch = [=](candidate_spec spec) {
    const size_t k = least_loaded();
    auto& w = st->workers[k];
    ++w.inflight;
    spec.worker_id = static_cast<int>(k);
    spec.eager_ms = st->eager;
    spec.num_bottlenecks = st->ledger->strategy().directions_needed();
    spec.history_json = history_json();
    {
      // user_test "best": the candidate runs test.py when it beats the best known now (a later best
      // only lowers the bar, so nothing that can become the best skips the test).
      auto b = st->ledger->best();
      double best_ms = b && b->time_ms >= 0 ? b->time_ms : not_measured;
      if (best_ms < 0 && st->initial > 0) best_ms = st->initial;
      spec.best_ms = best_ms;
    }
    if (auto it = st->analysis.find(spec.parent_id); it != st->analysis.end()) spec.baseline_json = it->second.dump();
    st->inflight[spec.id] = {static_cast<int>(k), spec};
    store::program_update u;
    u.worker = static_cast<int>(k);
    u.gpu_id = w.device_id;
    st->db->update_program(spec.id, u);
    emit("candidate_start", {{"candidate_id", spec.id}, {"parent_id", spec.parent_id}, {"round", spec.round},
                             {"gpu_id", w.device_id}, {"slot", static_cast<int>(st->inflight.size())},
                             {"direction", spec.bottleneck_id}});
    // The gpu worker enforces candidate_timeout_s (and kills the candidate); this request's own
    // timeout is only a backstop for a worker that stopped answering.
    const auto timeout = std::chrono::milliseconds(static_cast<long long>((ctx->cfg.candidate_timeout_s + 120.0) * 1000));
    self->request(w.actor, timeout, spec)
        .then([=](const candidate_result& res) { (*on_result)(res); },
              [=](caf::error& err) {
                // Anything but a timeout means the worker died (CAF answers its pending requests
                // with the exit reason before the down_msg arrives). The down handler records those
                // candidates and respawns the worker first, so nothing goes to the dead one.
                if (err != caf::sec::request_timeout) return;
                candidate_result res;
                res.candidate_id = spec.id;
                res.parent_id = spec.parent_id;
                res.round = spec.round;
                res.model = spec.model;
                res.failure_cause = "timeout";
                res.error = fmt::format("candidate exceeded candidate_timeout_s={}", ctx->cfg.candidate_timeout_s);
                (*on_result)(res);
              });
  };

  *pump = [=]() {
    if (st->finished) return;
    for (auto it = st->queue.begin(); it != st->queue.end();) {
      const auto& spec = *it;
      if (!st->analysis.count(spec.parent_id)) {
        if (!st->analyzing.count(spec.parent_id)) request_analysis(spec);
        ++it;
        continue;
      }
      if (static_cast<int>(st->inflight.size()) >= st->slots) break;
      auto s = *it;
      it = st->queue.erase(it);
      dispatch(s);
    }
  };

  // ---- rounds ----------------------------------------------------------------------------------
  auto end_round = [=]() {
    const auto closed = st->ledger->end_round();
    const auto& best = closed.best;
    const int round = st->ledger->round();
    st->db->set_states({{store::state_key::round, std::to_string(round)},
                        {store::state_key::round_done, std::to_string(round)},
                        {store::state_key::strategy_state, st->ledger->strategy_state().dump()}});
    emit("round_end", {{"round", round},
                       {"best_ms", best ? num_or_null(best->time_ms) : nlohmann::json(nullptr)},
                       {"best_program_id", best ? best->id : ""}});
    auto go_on = [=]() {
      if (st->stop_requested) return finish(true, "");
      if (closed.terminate) return finish(true, "");
      (*start_round)(round + 1);
    };
    // `profile: parents`: a new best has no profile yet. Where an early stop may follow from its
    // roofline, it is profiled now, before the next round spends anything (the next round's analysis
    // reuses this profile, so it costs no extra profile).
    if (ctx->cfg.profile == "parents" && st->stop_rule && st->stop_rule->config().early_stop && best &&
        best->id != "initial" && !st->profiles.count(best->id) && !st->stop_requested && !closed.terminate) {
      const auto id = best->id;
      if (profile_kernel(*best, "sol", "profile of the new best (a roofline stop may follow)",
                         [=](const nlohmann::json& prof) {
                           roofline_stop(prof, id);
                           go_on();
                         }))
        return;
    }
    go_on();
  };

  *start_round = [=](int r) {
    st->db->set_state(store::state_key::round, std::to_string(r));
    auto plans = st->ledger->plan_round(r);
    if (plans.empty()) return finish(true, "");
    emit("round_start", {{"round", r}, {"max_rounds", ctx->cfg.max_rounds}, {"candidates", plans.size()}});
    for (const auto& plan : plans) commit_plan(plan);
    (*pump)();
  };

  // ---- async: no round barrier -----------------------------------------------------------------
  // Every (parent, direction, model, sample) of the current beam is expanded at most once; a parent
  // of generation max_rounds is not expanded. The run ends when nothing is queued, nothing is in
  // flight and the beam offers nothing new.
  *refill = [=]() {
    if (st->finished) return;
    if (!st->stop_requested)
      for (const auto& plan : st->ledger->plan_more()) commit_plan(plan);
    if (st->ledger->async_done() && st->analyzing.empty()) return finish(true, "");
    (*pump)();
  };


  *on_result = [=](const candidate_result& res) {
    if (st->interrupted_by != 0) return;  // stays pending: --resume runs it again
    auto it = st->inflight.find(res.candidate_id);
    if (it == st->inflight.end()) return;  // already recorded (its worker went down first)
    auto& w = st->workers[static_cast<size_t>(it->second.worker)];
    --w.inflight;
    const candidate_spec spec = it->second.spec;
    st->inflight.erase(it);
    st->device_s += res.device_s;
    st->llm_s += res.llm_s;
    save_session();
    if (st->meter) {
      st->meter->record(res.llm_s, res.device_s);
      if (const int n = st->meter->next(st->slots); n != st->slots) {
        st->slots = n;
        emit("concurrency", {{"num_workers", n}, {"reason", st->meter->reason()}});
      }
    }
    // The search's rules decide: duplicate, new best, divergence, and whether the strategy sees it.
    const auto j = st->ledger->record({res.candidate_id, res.ok, res.time_ms, res.code, res.code_hash,
                                       res.failure_cause, res.error});
    store::program_update u;
    u.code = res.code;
    u.model = res.model.empty() ? spec.model : res.model;
    if (!res.bottleneck.empty()) u.bottleneck = res.bottleneck;
    u.analysis_mode = w.synthetic ? "synthetic" : "profiled";
    u.code_hash = j.code_hash;
    if (j.ok) {
      u.status = store::program_status::verified;
      u.time_ms = res.time_ms;
      if (res.floor_pct >= 0) u.floor_pct = res.floor_pct;
      if (st->initial > 0) u.speedup = st->initial / res.time_ms;
    } else {
      u.status = store::program_status::failed;
      u.failure_cause = j.failure_cause;
      u.error = j.error;
      if (j.failure_cause == store::failure_cause::duplicate && is_measured(res.time_ms)) u.time_ms = res.time_ms;
    }
    nlohmann::json prof = res.profile_json.empty() ? nlohmann::json(nullptr)
                                                   : nlohmann::json::parse(res.profile_json, nullptr, false);
    if (j.ok && prof.is_object() && prof.contains("roofline") && prof["roofline"].is_object()) {
      const auto& rl = prof["roofline"];
      if (rl.contains("compute_sol_pct") && rl["compute_sol_pct"].is_number()) u.compute_sol_pct = rl["compute_sol_pct"].get<double>();
      if (rl.contains("memory_sol_pct") && rl["memory_sol_pct"].is_number()) u.memory_sol_pct = rl["memory_sol_pct"].get<double>();
      if (rl.contains("efficiency_pct") && rl["efficiency_pct"].is_number()) u.sol_pct = rl["efficiency_pct"].get<double>();
    }
    st->db->update_program(res.candidate_id, u);
    if (j.ok && !res.profile_json.empty()) {
      st->profiles[res.candidate_id] = res.profile_json;
      st->db->set_state(std::string{store::state_key::profile_prefix} + res.candidate_id, res.profile_json);
    }
    if (j.diverged) {
      st->db->set_state_json(store::state_key::diverged, nlohmann::json(st->ledger->diverged()));
      emit("note", {{"what", "diverged"}, {"candidate_id", res.candidate_id},
                    {"time_ms", res.time_ms}, {"parent_time_ms", spec.parent_time_ms},
                    {"divergence_threshold", ctx->cfg.divergence_threshold}});
    }
    for (auto a : res.attempt) {
      a.program_id = res.candidate_id;
      a.worker_id = spec.worker_id;
      a.round_num = spec.round;
      st->db->insert_attempt(a);
    }
    for (auto r : res.reflexion) {
      r.program_id = res.candidate_id;
      r.worker_id = spec.worker_id;
      r.round_num = spec.round;
      st->db->insert_reflexion(r);
    }
    if (j.new_best) roofline_stop(prof, res.candidate_id);
    emit("candidate_result", {{"candidate_id", res.candidate_id}, {"parent_id", res.parent_id},
                              {"round", spec.round},              {"gpu_id", w.device_id},
                              {"ok", j.ok},                        {"time_ms", j.ok ? nlohmann::json(res.time_ms) : nlohmann::json(nullptr)},
                              {"failure_cause", j.ok ? "" : j.failure_cause},
                              {"error", j.ok ? "" : j.error.substr(0, 500)}, {"best_ms", num_or_null(j.best_ms)},
                              {"new_best", j.new_best}, {"device_s", res.device_s}, {"llm_s", res.llm_s},
                              {"diverged", j.diverged},
                              {"spread_pct", j.ok && is_measured(res.time_spread_pct) ? nlohmann::json(res.time_spread_pct)
                                                                                      : nlohmann::json(nullptr)}});
    if (j.ok && is_measured(res.time_spread_pct)) st->spreads[res.candidate_id] = res.time_spread_pct;
    if (st->finished) return;
    if (st->ledger->async()) {
      if (j.fed) st->db->set_state(store::state_key::strategy_state, st->ledger->strategy_state().dump());
      return (*refill)();
    }
    if (st->ledger->round_done()) return end_round();
    (*pump)();
  };

  // ---- supervision -----------------------------------------------------------------------------
  self->set_down_handler([=](caf::down_msg& dm) {
    for (size_t k = 0; k < st->workers.size(); ++k) {
      if (st->workers[k].actor.address() != dm.source) continue;
      if (st->finished) return;
      emit("error", {{"what", "gpu worker down"}, {"gpu_id", st->workers[k].device_id}, {"reason", to_string(dm.reason)}});
      std::vector<candidate_result> lost;
      for (const auto& [id, c] : st->inflight) {
        if (c.worker != static_cast<int>(k)) continue;
        candidate_result r;
        r.candidate_id = id;
        r.parent_id = c.spec.parent_id;
        r.round = c.spec.round;
        r.gpu_id = st->workers[k].device_id;
        r.model = c.spec.model;
        r.failure_cause = "actor_down";
        r.error = "gpu worker failed: " + to_string(dm.reason);
        lost.push_back(r);
      }
      ++st->workers[k].restarts;
      spawn_worker(k);
      emit("note", {{"what", "gpu worker respawned"}, {"gpu_id", st->workers[k].device_id},
                    {"restarts", st->workers[k].restarts}});
      for (const auto& r : lost) (*on_result)(r);
      return;
    }
  });

  // ---- start: a new run evaluates the initial kernel; a resumed one reloads its state -----------
  auto begin_search = [=]() {
    if (st->ledger->async()) return (*refill)();
    (*start_round)(1);
  };

  auto start_fresh = [=]() {
    store::program_record init;
    init.id = "initial";
    init.round = 0;
    init.worker = -1;
    init.gpu_id = ctx->device_ids.empty() ? 0 : ctx->device_ids.front();
    init.status = store::program_status::pending;
    init.code = ctx->input_code;
    if (!st->db->get_program("initial")) st->db->insert_program(init);
    const auto work_dir = (run_path / "candidates" / "initial").string();
    fs::create_directories(work_dir);
    const auto timeout = std::chrono::milliseconds(
        static_cast<long>((ctx->test_timeout_s + 3 * ctx->cfg.benchmark_timeout_s + ctx->cfg.user_test_timeout_s) * 1000));
    self->request(st->workers.front().actor, timeout, evaluate{"initial", ctx->input_code, "initial", work_dir})
        .then(
            [=](const evaluation& e) {
              if (st->finished) return;  // interrupted: the initial kernel stays pending
              st->eager = e.eager_ms;
              st->compile = e.compile_ms;
              st->device_s += e.wall_s;
              save_session();
              store::program_update u;
              u.code_hash = e.code_hash.empty() ? store::sha256_hex(ctx->input_code) : e.code_hash;
              if (!e.verified || !e.benchmarked) {
                u.status = store::program_status::failed;
                u.failure_cause = e.failure_cause.empty() ? "verification" : e.failure_cause;
                u.error = e.error;
                st->db->update_program("initial", u);
                const auto log = fs::path(work_dir) / "evaluate.log";
                try {
                  // What the interpreter said (its traceback and line included), beside the kernel.
                  store::write_file_atomic(log, e.error + "\n--- stderr ---\n" + e.stderr_tail +
                                                    "\n--- stdout ---\n" + e.stdout_tail + "\n");
                } catch (const std::exception&) {
                }
                emit("error", {{"what", e.failure_cause == store::failure_cause::problem
                                            ? "the kernel directory's problem.py failed"
                                            : "initial kernel failed verification"},
                               {"error", e.error.substr(0, 2000)}});
                if (e.failure_cause == store::failure_cause::problem)
                  return finish(false, "The kernel directory is at fault, not the kernel: " + e.error.substr(0, 600) +
                                           " (traceback in " + log.string() + ")");
                if (e.failure_cause == store::failure_cause::user_test)
                  return finish(false, "The starting kernel fails the kernel directory's own test: " + e.error.substr(0, 2000));
                if (e.verified)
                  return finish(false, "Initial kernel could not be timed: " + e.error.substr(0, 300));
                return finish(false, "Initial kernel failed correctness verification: " + e.error.substr(0, 300));
              }
              // The measured initial time is stored (SPEC §14 B.87): parents carry real times.
              st->initial = e.time_ms;
              u.status = store::program_status::verified;
              u.time_ms = e.time_ms;
              if (e.floor_pct >= 0) u.floor_pct = e.floor_pct;
              st->db->update_program("initial", u);
              st->db->set_state_json(store::state_key::eager_ms, num_or_null(st->eager));
              st->db->set_state_json(store::state_key::compile_ms, num_or_null(st->compile));
              st->db->set_state_json(store::state_key::initial_ms, num_or_null(st->initial));
              emit("initial", {{"initial_ms", num_or_null(st->initial)}, {"eager_ms", num_or_null(st->eager)},
                               {"compile_ms", num_or_null(st->compile)}, {"best_ms", num_or_null(st->initial)}});
              st->ledger->start({"initial", "", ctx->input_code, is_measured(e.time_ms) ? e.time_ms : -1, 0,
                                 *u.code_hash});
              begin_search();
            },
            [=](caf::error& err) { finish(false, "Initial kernel could not be evaluated: " + to_string(err)); });
  };

  // --resume: rebuild the search from what program.db committed. The strategy is replayed from the
  // stored results (round by round, or one by one in arrival order for async), which gives exactly
  // the state an uninterrupted run had at that point; pending candidates are planned again with
  // their original ids and plans, so none is lost and none is evaluated twice.
  auto resume = [=]() {
    auto init = st->db->get_program("initial");
    if (!init || init->status != store::program_status::verified) return start_fresh();
    auto num = [&](const char* key) {
      auto j = st->db->get_state_json(key);
      return j && j->is_number() ? j->get<double>() : -1.0;
    };
    st->eager = num(store::state_key::eager_ms);
    st->compile = num(store::state_key::compile_ms);
    if (auto s = st->db->get_state_json(store::state_key::sessions); s && s->is_array()) st->prior_sessions = *s;
    st->initial = init->time_ms.value_or(-1);
    std::map<std::string, nlohmann::json> plans;
    for (const auto& [key, value] : st->db->all_state()) {
      if (key.rfind(store::state_key::analysis_prefix, 0) == 0) {
        auto j = nlohmann::json::parse(value, nullptr, false);
        if (!j.is_discarded()) st->analysis[key.substr(std::string_view{store::state_key::analysis_prefix}.size())] = j;
      } else if (key.rfind(store::state_key::profile_prefix, 0) == 0) {
        st->profiles[key.substr(std::string_view{store::state_key::profile_prefix}.size())] = value;
      } else if (key.rfind(store::state_key::spec_prefix, 0) == 0) {
        auto j = nlohmann::json::parse(value, nullptr, false);
        if (j.is_object()) plans[key.substr(std::string_view{store::state_key::spec_prefix}.size())] = j;
      }
    }
    std::set<std::string> diverged;
    if (auto d = st->db->get_state_json(store::state_key::diverged); d && d->is_array())
      for (const auto& id : *d) diverged.insert(id.get<std::string>());
    if (auto m = st->db->get_state_json(store::state_key::analysis_mode); m && m->is_object())
      for (auto& w : st->workers)
        if (m->value(std::to_string(w.device_id), std::string{}) == "synthetic") {
          w.synthetic = true;
          w.synthetic_reason = "synthetic before the resume";
          self->send(w.actor, mode_atom::value, std::string{"synthetic"});
        }
    const int round_done = std::stoi(st->db->get_state(store::state_key::round_done).value_or("0"));
    // The ledger replays the search from what program.db committed and says what comes next.
    const auto plan = st->ledger->resume(st->db->list_programs(), plans, round_done, diverged, st->default_model);
    for (const auto& q : plan.requeued) st->queue.push_back(spec_of(q));
    for (const auto& q : plan.replanned) commit_plan(q);
    {
      // What the earlier sessions did, so that the progress line goes on from their totals.
      const auto prior = store::totals_of(st->prior_sessions);
      const auto by_cause = st->db->failures_by_cause();
      const long dups = by_cause.count("duplicate") ? static_cast<long>(by_cause.at("duplicate")) : 0;
      emit("resume", {{"from_round", st->ledger->round()}, {store::state_key::round_done, round_done},
                      {"pending", plan.pending},
                      {"verified", st->db->count(store::program_status::verified) - 1},
                      {"failed", st->db->count(store::program_status::failed) - dups},
                      {"duplicates", dups},
                      {"prior", {{"sessions", prior.sessions}, {"wall_s", prior.wall_s}, {"device_s", prior.device_s},
                                 {"capacity_s", prior.capacity_s}}},
                      {"next_candidate", st->ledger->next_candidate()}});
    }
    auto best = st->ledger->strategy().best();
    emit("initial", {{"initial_ms", num_or_null(st->initial)}, {"eager_ms", num_or_null(st->eager)},
                     {"compile_ms", num_or_null(st->compile)},
                     {"best_ms", best ? num_or_null(best->time_ms) : num_or_null(st->initial)}});
    switch (plan.next) {
      case search::resume_step::refill: return (*refill)();
      case search::resume_step::dispatch: return (*pump)();
      case search::resume_step::end_round: return end_round();
      case search::resume_step::start_round: return (*start_round)(plan.start_round);
      case search::resume_step::finish: return finish(true, "");
    }
  };

  auto llm_models_json = [=] {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& m : ctx->llm_models)
      a.push_back({{"provider", m.provider}, {"model", m.model}, {"endpoint", m.endpoint}, {"key_env", m.key_env}});
    return a;
  };

  return {
      [=](start_atom) {
        for (size_t k = 0; k < st->workers.size(); ++k) spawn_worker(k);
        emit("run_start", {{"strategy", ctx->cfg.name}, {"search", st->ledger->strategy().name()},
                           {store::state_key::kernel_dir, ctx->kernel_dir}, {"vendor", ctx->vendor},
                           {"devices", ctx->device_ids}, {"gpu_name", ctx->gpu_name},
                           {"platform", ctx->cfg.platform.uniform()}, {"max_rounds", ctx->cfg.max_rounds},
                           {"schedule", st->ledger->async() ? "async" : "rounds"}, {"num_workers", st->slots},
                           {"num_workers_auto", st->meter.has_value()},
                           {"resume", ctx->resume}, {"sandbox", ctx->sandbox_mode},
                           {"llm", {{"provider", ctx->llm_chosen.provider}, {"model", ctx->llm_chosen.model},
                                    {"endpoint", ctx->llm_chosen.endpoint}, {"reason", ctx->llm_chosen.reason},
                                    {"key_env", ctx->llm_chosen.key_env}}},
                           {"llm_models", llm_models_json()},
                           {"sandbox_warning", ctx->sandbox_warning}});
        for (const auto& n : ctx->notes) emit("note", {{"what", n}});
        st->db->set_states({{store::state_key::status, "running"}, {store::state_key::kernel_dir, ctx->kernel_dir},
                            {store::state_key::strategy_name, ctx->cfg.name}});
        if (ctx->resume) {
          st->resumed = true;
          return resume();
        }
        save_modes();
        start_fresh();
      },
      [=](step_atom, const std::string& what) {
        // A step of the starting kernel's evaluation (the progress line shows it).
        if (!st->finished) emit("initial_step", {{"step", what}});
      },
      [=](interrupt_atom, int sig) -> caf::result<bool> {
        // Ctrl-C / SIGTERM: nothing new starts and no result is recorded from now on (what is in
        // flight stays pending in program.db, so --resume runs it again). The workers end their
        // candidates before the answer goes out; only then does the runtime kill the children.
        if (st->finished) return false;
        st->interrupted_by = sig;
        emit("interrupted", {{"signal", stop_signal_name(sig)}, {"in_flight", st->inflight.size()},
                             {"queued", st->queue.size()}});
        auto rp = self->make_response_promise<bool>();
        auto left = std::make_shared<size_t>(st->workers.size());
        auto done = [=]() mutable {
          if (*left > 0 && --*left > 0) return;
          rp.deliver(true);
        };
        finish_now(false, fmt::format("interrupted by {}", stop_signal_name(sig)));
        if (st->workers.empty()) rp.deliver(true);
        for (auto& w : st->workers)
          self->request(w.actor, std::chrono::seconds(2), interrupt_atom::value, sig)
              .then([=](bool) mutable { done(); }, [=](caf::error&) mutable { done(); });
        return rp;
      },
      [=](const profiling_failed& pf) {
        // Supervision: a profile failed on one device. On ROCm that device's session turns synthetic
        // for the rest of the run (SPEC §7.4, §14 A.22-A.25): decided by the component's platform.
        ++st->profiling_failures;
        emit("profiling_failed", {{"gpu_id", pf.gpu_id}, {"candidate_id", pf.candidate_id}, {"platform", pf.platform},
                                  {"invocation", pf.invocation}, {"reason", pf.reason.substr(0, 1000)},
                                  {"output_tail", pf.output_tail.substr(0, 2000)}});
        if (pf.platform != "rocm") return;
        for (auto& w : st->workers) {
          if (w.device_id != pf.gpu_id || w.synthetic) continue;
          w.synthetic = true;
          w.synthetic_reason = pf.invocation.empty() ? pf.reason : pf.invocation + ": " + pf.reason;
          self->send(w.actor, mode_atom::value, std::string{"synthetic"});
          nlohmann::json change{{"gpu_id", w.device_id}, {"mode", "synthetic"}, {"reason", w.synthetic_reason.substr(0, 500)},
                                {"invocation", pf.invocation}, {"candidate_id", pf.candidate_id}};
          st->mode_changes.push_back(change);
          emit("mode_change", change);
          save_modes();
        }
      },
      [=](const dedup_query& q) {
        // A candidate is about to be profiled: a duplicate is recognised first, and a new hash is
        // claimed, so that an identical sibling finishing later is the duplicate.
        dedup_answer a;
        a.duplicate_of = st->ledger->duplicate_of(q.code_hash, q.candidate_id);
        if (a.duplicate_of.empty())
          st->ledger->claim(q.code_hash, q.candidate_id);
        else if (auto it = st->profiles.find(a.duplicate_of); it != st->profiles.end())
          a.profile_json = it->second;
        return a;
      },
      [=](const store::llm_call_record& c) {
        // Usage of one LLM call (after its retries), from the llm_client.
        st->db->record_llm_call(c);
      },
  };
}

} // namespace kagent
