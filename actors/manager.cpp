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
#include "actors/strategy.hpp"
#include "platform/common/stop.hpp"
#include "platform/gpu/specs.hpp"
#include "platform/search/concurrency.hpp"
#include "platform/nvidia/nvidia_roofline.hpp"
#include "platform/store/program_db.hpp"
#include "platform/store/run_directory.hpp"
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
  std::unique_ptr<search_strategy> strategy;
  std::unique_ptr<roofline_analyzer> stop_rule;  ///< run-level roofline stop check (new bests only)
  caf::actor reporter, llm;
  std::vector<worker_slot> workers;
  std::deque<candidate_spec> queue;                   ///< planned, waiting for a slot or an analysis
  std::map<std::string, inflight_candidate> inflight;
  std::map<std::string, nlohmann::json> analysis;     ///< parent id -> baseline analysis
  std::set<std::string> analyzing;
  std::map<std::string, std::string> profiles;        ///< program id -> its SOL profile JSON
  std::map<std::string, std::string> claims;          ///< code hash -> the in-flight candidate that asked first
  std::set<std::string> expanded;                     ///< async: parent|direction|model|sample
  std::set<std::string> diverged;                     ///< verified, but too slow to become a parent
  std::map<std::string, double> spreads;              ///< candidate -> IQR of its timed calls / median, in %
  std::vector<program_entry> round_results;
  std::string default_model;
  int round = 0;
  int next_candidate = 0;
  int slots = 1;
  bool async = false;
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

/// Wall seconds, device seconds and device capacity (wall x devices) of a `sessions` array.
struct session_totals {
  double wall_s = 0, device_s = 0, capacity_s = 0;
  int sessions = 0;
};

session_totals totals_of(const nlohmann::json& sessions) {
  session_totals t;
  if (!sessions.is_array()) return t;
  for (const auto& s : sessions) {
    if (!s.is_object()) continue;
    const double wall = s.value("wall_s", 0.0), dev = s.value("device_s", 0.0);
    const double n = static_cast<double>(std::max(1, s.value("devices", 1)));
    if (!(wall >= 0) || !(dev >= 0)) continue;
    t.wall_s += wall;
    t.device_s += dev;
    t.capacity_s += wall * n;
    ++t.sessions;
  }
  return t;
}

nlohmann::json num_or_null(double v) { return is_measured(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

std::string combo_key(const std::string& parent, int direction, const std::string& model, int sample) {
  return fmt::format("{}|{}|{}|{}", parent, direction, model, sample);
}

int candidate_number(const std::string& id) {
  auto c = id.rfind("_c");
  if (c == std::string::npos) return -1;
  try {
    return std::stoi(id.substr(c + 2));
  } catch (...) {
    return -1;
  }
}

nlohmann::json spec_to_json(const candidate_spec& s) {
  return {{"id", s.id},           {"parent_id", s.parent_id},     {"round", s.round},
          {"bottleneck_id", s.bottleneck_id}, {"sample_idx", s.sample_idx}, {"model", s.model}};
}

} // namespace

caf::behavior manager_actor(caf::event_based_actor* self, context_ptr ctx, caf::actor waiter) {
  install_exception_handler(self, "manager");
  auto st = std::make_shared<manager_state>();
  const auto run_path = fs::path(ctx->run_path);
  st->db = std::make_unique<store::program_db>(store::program_db::open(run_path / "program.db"));
  st->default_model = ctx->cfg.llm.model.empty() ? ctx->cfg.openai_model : ctx->cfg.llm.model;
  st->strategy = make_strategy(ctx->cfg, st->default_model);
  st->async = ctx->cfg.strategy_cfg.schedule == "async" && ctx->cfg.strategy != "greedy";
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
    if (top.empty()) return st->strategy->best();
    return to_entry(top.front());
  };

  auto finish_now = [=](bool success, const std::string& error) {
    if (st->finished) return;
    st->finished = true;
    store::run_directory rd = store::run_directory::open_existing(run_path);
    auto best = fastest_verified();
    nlohmann::json s;
    const bool interrupted = st->interrupted_by != 0;
    std::string why = error;
    if (success && !interrupted && st->db->count() > 1) {
      // A search in which no candidate ever got an LLM reply found nothing: it failed, with the
      // first LLM error as the reason (a dead endpoint, an exhausted replay set, a spent budget).
      long replies = 0;
      for (const auto& u : st->db->llm_usage()) replies += u.calls - u.failed_calls;
      if (replies == 0) {
        success = false;
        std::string first;
        for (const auto& p : st->db->list_programs())
          if (p.failure_cause.value_or("") == "llm" && p.error) {
            first = p.error->substr(0, 300);
            break;
          }
        why = "no candidate got an LLM reply" + (first.empty() ? std::string{} : "; the first error: " + first);
      }
    }
    s["success"] = !interrupted && success && best && best->time_ms >= 0;
    if (!why.empty()) s["error"] = why;
    s["run_state"] = interrupted ? "interrupted" : s["success"].get<bool>() ? "finished" : "failed";
    if (interrupted) {
      s["interrupted"] = true;
      s["interrupted_by"] = stop_signal_name(st->interrupted_by);
      s["resume_command"] = "kagent-actors --resume " + ctx->run_path;
    }
    s["strategy"] = ctx->cfg.name;
    s["search"] = st->strategy->name();
    s["schedule"] = st->async ? "async" : "rounds";
    s["num_workers"] = st->slots;
    s["num_workers_mode"] = st->meter ? "auto" : "fixed";
    if (st->meter) s["num_workers_reason"] = st->meter->reason();
    s["kernel_dir"] = ctx->kernel_dir;
    s["run_dir"] = ctx->run_path;
    s["run_id"] = run_path.filename().string();
    s["vendor"] = ctx->vendor;
    s["devices"] = ctx->device_ids;
    s["gpu_name"] = ctx->gpu_name;
    s["platform"] = ctx->cfg.platform.uniform();
    s["profiler_platform"] = ctx->cfg.platform.profiler;
    s["resumed"] = st->resumed;
    s["eager_ms"] = num_or_null(st->eager);
    s["compile_ms"] = num_or_null(st->compile);
    s["initial_ms"] = num_or_null(st->initial);
    // An interrupted run still names its best so far (and writes it): hours of search are not lost.
    if (s["success"].get<bool>() || (interrupted && best && best->time_ms >= 0 && best->id != "initial")) {
      s["best_ms"] = best->time_ms;
      s["best_program_id"] = best->id;
      if (auto rec = st->db->get_program(best->id); rec && rec->floor_pct) s["best_floor_pct"] = *rec->floor_pct;
      rd.write_best_kernel(best->code);
      s["best_kernel_path"] = rd.best_kernel_path().string();
      if (st->initial > 0) s["speedup_vs_initial"] = st->initial / best->time_ms;
      if (st->eager > 0) s["speedup_vs_eager"] = st->eager / best->time_ms;
      if (st->compile > 0) s["speedup_vs_compile"] = st->compile / best->time_ms;
    } else {
      s["best_ms"] = nullptr;
    }
    s["version"] = KAGENT_VERSION;
    s["rounds"] = st->round;
    // Counts of candidates: the starting kernel is none of them, and a duplicate is not a failure.
    const auto by_cause = st->db->failures_by_cause();
    const long duplicates = by_cause.count("duplicate") ? static_cast<long>(by_cause.at("duplicate")) : 0;
    auto initial_rec = st->db->get_program("initial");
    const bool initial_verified = initial_rec && initial_rec->status == store::program_status::verified;
    s["candidates"] = st->db->count() - 1;  // minus the initial kernel
    s["verified"] = st->db->count(store::program_status::verified) - (initial_verified ? 1 : 0);
    s["duplicates"] = duplicates;
    s["failed"] = st->db->count(store::program_status::failed) - duplicates -
                  (initial_rec && initial_rec->status == store::program_status::failed ? 1 : 0);
    s["pending"] = st->db->count(store::program_status::pending) -
                   (initial_rec && initial_rec->status == store::program_status::pending ? 1 : 0);
    s["failures_by_cause"] = by_cause;
    s["diverged"] = st->diverged.size();
    if (st->stop_requested) s["early_stop_reason"] = st->stop_reason;
    nlohmann::json synth = nlohmann::json::array();
    for (const auto& w : st->workers)
      if (w.synthetic) synth.push_back({{"gpu_id", w.device_id}, {"reason", w.synthetic_reason}});
    s["synthetic_devices"] = synth;
    s["profiling_failures"] = st->profiling_failures;
    if (best) {
      if (auto it = st->profiles.find(best->id); it != st->profiles.end()) {
        auto pj = nlohmann::json::parse(it->second, nullptr, false);
        if (pj.is_object() && pj.contains("roofline")) s["best_roofline"] = pj["roofline"];
      }
    }
    s["mode_changes"] = st->mode_changes;
    nlohmann::json top = nlohmann::json::array();
    // Diverged kernels (verified, but too slow to be a parent) are not top kernels.
    for (const auto& p : st->db->top_k_verified(5 + st->diverged.size())) {
      if (st->diverged.count(p.id) || top.size() >= 5) continue;
      nlohmann::json t{{"program_id", p.id}, {"time_ms", num_or_null(p.time_ms.value_or(-1))}, {"generation", p.round}};
      if (auto sp = st->spreads.find(p.id); sp != st->spreads.end()) t["spread_pct"] = sp->second;
      top.push_back(t);
    }
    s["top_kernels"] = top;
    nlohmann::json llm{{"calls", 0}, {"failed_calls", 0}, {"tokens_in", 0}, {"tokens_out", 0}, {"cost_usd", 0.0}};
    nlohmann::json by = nlohmann::json::array();
    for (const auto& u : st->db->llm_usage()) {
      llm["calls"] = llm["calls"].get<long>() + u.calls;
      llm["failed_calls"] = llm["failed_calls"].get<long>() + u.failed_calls;
      llm["tokens_in"] = llm["tokens_in"].get<long>() + u.tokens_in;
      llm["tokens_out"] = llm["tokens_out"].get<long>() + u.tokens_out;
      llm["cost_usd"] = llm["cost_usd"].get<double>() + u.cost_usd;
      by.push_back({{"purpose", u.purpose}, {"model", u.model}, {"calls", u.calls}, {"tokens_in", u.tokens_in},
                    {"tokens_out", u.tokens_out}, {"cost_usd", u.cost_usd}});
    }
    llm["by_purpose_and_model"] = by;
    {
      // Per model, all purposes together, with the provider each model was reached through.
      std::map<std::string, std::string> provider_of{{ctx->llm_chosen.model, ctx->llm_chosen.provider}};
      for (const auto& m : ctx->llm_models) provider_of[m.model] = m.provider;
      std::map<std::string, nlohmann::json> per;
      for (const auto& u : st->db->llm_usage()) {
        auto& m = per[u.model];
        if (m.is_null())
          m = {{"model", u.model}, {"provider", provider_of.count(u.model) ? provider_of[u.model] : ctx->llm_chosen.provider},
               {"calls", 0}, {"failed_calls", 0}, {"tokens_in", 0}, {"tokens_out", 0}, {"cost_usd", 0.0}};
        m["calls"] = m["calls"].get<long>() + u.calls;
        m["failed_calls"] = m["failed_calls"].get<long>() + u.failed_calls;
        m["tokens_in"] = m["tokens_in"].get<long>() + u.tokens_in;
        m["tokens_out"] = m["tokens_out"].get<long>() + u.tokens_out;
        m["cost_usd"] = m["cost_usd"].get<double>() + u.cost_usd;
      }
      nlohmann::json bm = nlohmann::json::array();
      for (auto& [name, m] : per) bm.push_back(m);
      llm["by_model"] = bm;
    }
    s["llm"] = llm;
    {
      // Totals over every session of the run (--resume continues them): device seconds over the
      // sum of wall time x devices, as the progress line shows it.
      const auto sessions = all_sessions();
      const auto t = totals_of(sessions);
      s["wall_s"] = t.wall_s;
      s["device_s"] = t.device_s;
      s["sessions"] = t.sessions;
      s["session_wall_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - st->t0).count();
      s["gpu_busy_pct"] = t.capacity_s > 0 ? nlohmann::json(100.0 * t.device_s / t.capacity_s) : nlohmann::json(nullptr);
      try {
        st->db->set_state(store::state_key::sessions, sessions.dump());
      } catch (const std::exception&) {
      }
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
  auto plan_candidate = [=](const candidate_plan& plan, int round) {
    candidate_spec spec;
    spec.id = fmt::format("r{}_c{}", round, st->next_candidate++);
    spec.parent_id = plan.parent.id;
    spec.round = round;
    spec.bottleneck_id = plan.bottleneck_id;
    spec.sample_idx = plan.sample_idx;
    spec.model = plan.model;
    spec.parent_code = plan.parent.code;
    spec.parent_time_ms = plan.parent.time_ms;
    spec.work_dir = (run_path / "candidates" / spec.id).string();
    store::program_record rec;
    rec.id = spec.id;
    rec.parent_id = spec.parent_id;
    rec.round = round;
    rec.status = store::program_status::pending;
    rec.model = spec.model;
    rec.bottleneck = fmt::format("direction {}", spec.bottleneck_id);
    // A pending row without its plan (a kill between the two commits) is completed, not duplicated.
    if (!st->db->get_program(rec.id)) st->db->insert_program(rec);
    st->db->set_states({{std::string{store::state_key::spec_prefix} + spec.id, spec_to_json(spec).dump()},
                        {store::state_key::next_candidate, std::to_string(st->next_candidate)}});
    st->expanded.insert(combo_key(spec.parent_id, spec.bottleneck_id, spec.model, spec.sample_idx));
    st->queue.push_back(spec);
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
    req.num_bottlenecks = st->strategy->directions_needed();
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
    spec.num_bottlenecks = st->strategy->directions_needed();
    spec.history_json = history_json();
    {
      // user_test "best": the candidate runs test.py when it beats the best known now (a later best
      // only lowers the bar, so nothing that can become the best skips the test).
      auto b = st->strategy->best();
      double best_ms = b && b->time_ms >= 0 ? b->time_ms : not_measured;
      for (const auto& r : st->round_results)
        if (r.time_ms >= 0 && (best_ms < 0 || r.time_ms < best_ms)) best_ms = r.time_ms;
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
    st->strategy->update_with_results(st->round_results, st->round);
    st->round_results.clear();
    auto best = st->strategy->best();
    st->db->set_states({{store::state_key::round, std::to_string(st->round)},
                        {store::state_key::round_done, std::to_string(st->round)},
                        {store::state_key::strategy_state, st->strategy->save_state().dump()}});
    emit("round_end", {{"round", st->round},
                       {"best_ms", best ? num_or_null(best->time_ms) : nlohmann::json(nullptr)},
                       {"best_program_id", best ? best->id : ""}});
    auto go_on = [=]() {
      if (st->stop_requested) return finish(true, "");
      if (st->strategy->should_terminate(st->round, ctx->cfg.max_rounds)) return finish(true, "");
      (*start_round)(st->round + 1);
    };
    // `profile: parents`: a new best has no profile yet. Where an early stop may follow from its
    // roofline, it is profiled now, before the next round spends anything (the next round's analysis
    // reuses this profile, so it costs no extra profile).
    if (ctx->cfg.profile == "parents" && st->stop_rule && st->stop_rule->config().early_stop && best &&
        best->id != "initial" && !st->profiles.count(best->id) && !st->stop_requested &&
        !st->strategy->should_terminate(st->round, ctx->cfg.max_rounds)) {
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
    st->round = r;
    st->db->set_state(store::state_key::round, std::to_string(r));
    auto plans = st->strategy->select_candidates(r);
    if (plans.empty()) return finish(true, "");
    emit("round_start", {{"round", r}, {"max_rounds", ctx->cfg.max_rounds}, {"candidates", plans.size()}});
    for (const auto& plan : plans) plan_candidate(plan, r);
    (*pump)();
  };

  // ---- async: no round barrier -----------------------------------------------------------------
  // Every (parent, direction, model, sample) of the current beam is expanded at most once; a parent
  // of generation max_rounds is not expanded. The run ends when nothing is queued, nothing is in
  // flight and the beam offers nothing new.
  *refill = [=]() {
    if (st->finished) return;
    if (!st->stop_requested) {
      for (const auto& plan : st->strategy->select_candidates(st->round + 1)) {
        if (plan.parent.generation >= ctx->cfg.max_rounds) continue;
        if (st->expanded.count(combo_key(plan.parent.id, plan.bottleneck_id, plan.model, plan.sample_idx))) continue;
        plan_candidate(plan, plan.parent.generation + 1);
      }
    }
    if (st->queue.empty() && st->inflight.empty() && st->analyzing.empty()) return finish(true, "");
    (*pump)();
  };


  // What the strategy sees of a finished candidate: every verified, measured kernel, and for greedy a
  // verified duplicate too (for greedy it is a round without improvement, SPEC §2.4). A
  // kernel past divergence_threshold never becomes a beam parent; greedy still counts it as a
  // round without improvement. --resume replays exactly this rule.
  const bool greedy = st->strategy->name() == "greedy";
  auto feeds_strategy = [=](const store::program_record& p) {
    if (p.id == "initial" || !p.time_ms) return false;
    if (p.status == store::program_status::verified) return greedy || !st->diverged.count(p.id);
    // A duplicate only matters to greedy; beam search would let a luckier timing of the same code
    // displace the verified original.
    return greedy && p.status == store::program_status::failed &&
           p.failure_cause.value_or("") == store::failure_cause::duplicate;
  };

  // The program this compiled code duplicates: a verified one, or an in-flight candidate that asked
  // first (dedup_query, before its profile). "" when the code is new.
  auto duplicate_of = [=](const std::string& hash, const std::string& id) -> std::string {
    if (hash.empty()) return "";
    auto dup = st->db->find_by_code_hash(hash, std::string{store::program_status::verified});
    if (dup && dup->id != id) return dup->id;
    if (auto c = st->claims.find(hash); c != st->claims.end() && c->second != id) return c->second;
    return "";
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
    store::program_update u;
    u.code = res.code;
    u.model = res.model.empty() ? spec.model : res.model;
    if (!res.bottleneck.empty()) u.bottleneck = res.bottleneck;
    u.analysis_mode = w.synthetic ? "synthetic" : "profiled";
    bool ok = res.ok;
    std::string cause = res.failure_cause, error = res.error;
    if (ok) {
      if (auto dup = duplicate_of(res.code_hash, res.candidate_id); !dup.empty()) {
        ok = false;
        cause = store::failure_cause::duplicate;
        error = "same compiled code as " + dup;
      }
    }
    std::erase_if(st->claims, [&](const auto& c) { return c.second == res.candidate_id; });
    u.code_hash = res.code_hash.empty() ? store::sha256_hex(res.code) : res.code_hash;
    auto best_before = st->strategy->best();
    for (const auto& r : st->round_results)
      if (!best_before || r.time_ms < best_before->time_ms) best_before = r;
    // "New best" is decided before any tracker moves (SPEC §14 B.81).
    const bool new_best = ok && (!best_before || best_before->time_ms < 0 || res.time_ms < best_before->time_ms);
    bool diverged = false;
    if (ok) {
      u.status = store::program_status::verified;
      u.time_ms = res.time_ms;
      if (res.floor_pct >= 0) u.floor_pct = res.floor_pct;
      if (st->initial > 0) u.speedup = st->initial / res.time_ms;
      // divergence_threshold (SPEC §4.3): a kernel that much slower than its parent stays recorded
      // and verified, but never becomes a parent.
      if (is_measured(spec.parent_time_ms) && spec.parent_time_ms > 0 &&
          (res.time_ms - spec.parent_time_ms) / spec.parent_time_ms * 100.0 > ctx->cfg.divergence_threshold)
        diverged = true;
    } else {
      u.status = store::program_status::failed;
      u.failure_cause = cause.empty() ? "unknown" : cause;
      u.error = error;
      if (cause == store::failure_cause::duplicate && is_measured(res.time_ms)) u.time_ms = res.time_ms;
    }
    nlohmann::json prof = res.profile_json.empty() ? nlohmann::json(nullptr)
                                                   : nlohmann::json::parse(res.profile_json, nullptr, false);
    if (ok && prof.is_object() && prof.contains("roofline") && prof["roofline"].is_object()) {
      const auto& rl = prof["roofline"];
      if (rl.contains("compute_sol_pct") && rl["compute_sol_pct"].is_number()) u.compute_sol_pct = rl["compute_sol_pct"].get<double>();
      if (rl.contains("memory_sol_pct") && rl["memory_sol_pct"].is_number()) u.memory_sol_pct = rl["memory_sol_pct"].get<double>();
      if (rl.contains("efficiency_pct") && rl["efficiency_pct"].is_number()) u.sol_pct = rl["efficiency_pct"].get<double>();
    }
    st->db->update_program(res.candidate_id, u);
    if (ok && !res.profile_json.empty()) {
      st->profiles[res.candidate_id] = res.profile_json;
      st->db->set_state(std::string{store::state_key::profile_prefix} + res.candidate_id, res.profile_json);
    }
    if (diverged) {
      st->diverged.insert(res.candidate_id);
      st->db->set_state_json(store::state_key::diverged, nlohmann::json(st->diverged));
      emit("note", {{"what", "diverged"}, {"candidate_id", res.candidate_id},
                    {"time_ms", res.time_ms}, {"parent_time_ms", spec.parent_time_ms},
                    {"divergence_threshold", ctx->cfg.divergence_threshold}});
    }
    if (!res.attempt_json.empty()) {
      auto aj = nlohmann::json::parse(res.attempt_json, nullptr, false);
      if (aj.is_object()) {
        auto a = store::attempt_from_json(aj);
        a.program_id = res.candidate_id;
        a.worker_id = spec.worker_id;
        a.round_num = spec.round;
        st->db->insert_attempt(a);
      }
    }
    if (!res.reflexion_json.empty()) {
      auto rj = nlohmann::json::parse(res.reflexion_json, nullptr, false);
      if (rj.is_object()) {
        auto r = store::reflexion_from_json(rj);
        r.program_id = res.candidate_id;
        r.worker_id = spec.worker_id;
        r.round_num = spec.round;
        st->db->insert_reflexion(r);
      }
    }
    if (new_best) roofline_stop(prof, res.candidate_id);
    double best_ms = best_before ? best_before->time_ms : -1;
    if (new_best) best_ms = res.time_ms;
    emit("candidate_result", {{"candidate_id", res.candidate_id}, {"parent_id", res.parent_id},
                              {"round", spec.round},              {"gpu_id", w.device_id},
                              {"ok", ok},                          {"time_ms", ok ? nlohmann::json(res.time_ms) : nlohmann::json(nullptr)},
                              {"failure_cause", ok ? "" : u.failure_cause.value_or("")},
                              {"error", ok ? "" : error.substr(0, 500)}, {"best_ms", num_or_null(best_ms)},
                              {"new_best", new_best}, {"device_s", res.device_s}, {"llm_s", res.llm_s},
                              {"diverged", diverged},
                              {"spread_pct", ok && is_measured(res.time_spread_pct) ? nlohmann::json(res.time_spread_pct)
                                                                                    : nlohmann::json(nullptr)}});
    if (ok && is_measured(res.time_spread_pct)) st->spreads[res.candidate_id] = res.time_spread_pct;
    if (st->finished) return;
    auto rec = st->db->get_program(res.candidate_id);
    const bool feed = rec && feeds_strategy(*rec);
    if (st->async) {
      if (feed) {
        st->strategy->update_with_results({to_entry(*rec)}, spec.round);
        st->db->set_state(store::state_key::strategy_state, st->strategy->save_state().dump());
      }
      st->round = std::max(st->round, spec.round);
      return (*refill)();
    }
    if (feed) st->round_results.push_back(to_entry(*rec));
    bool round_done = st->queue.empty();
    for (const auto& [id, c] : st->inflight)
      if (c.spec.round == st->round) round_done = false;
    if (round_done) return end_round();
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
    if (st->async) return (*refill)();
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
              st->strategy->initialize({"initial", "", ctx->input_code, is_measured(e.time_ms) ? e.time_ms : -1, 0,
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
    st->strategy->initialize(to_entry(*init));
    for (const auto& [key, value] : st->db->all_state()) {
      if (key.rfind(store::state_key::analysis_prefix, 0) == 0) {
        auto j = nlohmann::json::parse(value, nullptr, false);
        if (!j.is_discarded()) st->analysis[key.substr(std::string_view{store::state_key::analysis_prefix}.size())] = j;
      } else if (key.rfind(store::state_key::profile_prefix, 0) == 0) {
        st->profiles[key.substr(std::string_view{store::state_key::profile_prefix}.size())] = value;
      }
    }
    if (auto d = st->db->get_state_json(store::state_key::diverged); d && d->is_array())
      for (const auto& id : *d) st->diverged.insert(id.get<std::string>());
    if (auto m = st->db->get_state_json(store::state_key::analysis_mode); m && m->is_object())
      for (auto& w : st->workers)
        if (m->value(std::to_string(w.device_id), std::string{}) == "synthetic") {
          w.synthetic = true;
          w.synthetic_reason = "synthetic before the resume";
          self->send(w.actor, mode_atom::value, std::string{"synthetic"});
        }
    const int round_done = std::stoi(st->db->get_state(store::state_key::round_done).value_or("0"));
    int max_round = 0;
    std::vector<store::program_record> pending;
    std::vector<store::program_record> all = st->db->list_programs();
    for (const auto& p : all) {
      if (p.id == "initial") continue;
      st->next_candidate = std::max(st->next_candidate, candidate_number(p.id) + 1);
      max_round = std::max(max_round, p.round);
      if (auto s = st->db->get_state(std::string{store::state_key::spec_prefix} + p.id)) {
        auto j = nlohmann::json::parse(*s);
        st->expanded.insert(combo_key(j.value("parent_id", ""), j.value("bottleneck_id", 1), j.value("model", ""),
                                      j.value("sample_idx", 0)));
      }
      if (p.status == store::program_status::pending) pending.push_back(p);
    }
    // Replay the strategy: every completed, verified, non-diverged result in commit order.
    auto eligible = [&](const store::program_record& p) { return feeds_strategy(p); };
    if (st->async) {
      for (const auto& p : all)
        if (eligible(p)) st->strategy->update_with_results({to_entry(p)}, p.round);
      st->round = max_round;
    } else {
      for (int r = 1; r <= round_done; ++r) {
        std::vector<program_entry> rs;
        for (const auto& p : all)
          if (p.round == r && eligible(p)) rs.push_back(to_entry(p));
        st->strategy->update_with_results(rs, r);
      }
      st->round = std::max(round_done, max_round);
      for (const auto& p : all)
        if (p.round == st->round && st->round > round_done && eligible(p)) st->round_results.push_back(to_entry(p));
    }
    // Re-plan the pending candidates with their original ids and plans.
    std::map<std::string, program_entry> by_id;
    for (const auto& p : all) by_id[p.id] = to_entry(p);
    for (const auto& p : pending) {
      auto s = st->db->get_state(std::string{store::state_key::spec_prefix} + p.id);
      if (!s) continue;
      auto j = nlohmann::json::parse(*s);
      candidate_spec spec;
      spec.id = p.id;
      spec.parent_id = j.value("parent_id", "initial");
      spec.round = j.value("round", p.round);
      spec.bottleneck_id = j.value("bottleneck_id", 1);
      spec.sample_idx = j.value("sample_idx", 0);
      spec.model = j.value("model", st->default_model);
      const auto& parent = by_id.count(spec.parent_id) ? by_id[spec.parent_id] : by_id["initial"];
      spec.parent_code = parent.code;
      spec.parent_time_ms = parent.time_ms;
      spec.work_dir = (run_path / "candidates" / spec.id).string();
      st->queue.push_back(spec);
    }
    if (!st->async && st->round > round_done && round_done >= 1) {
      // A kill while the round was being planned leaves only part of it in program.db: the strategy,
      // replayed to the state it had then, plans the same round again; what is missing is added,
      // under the ids of pending rows whose plan was never committed (they were the last ones).
      const int after = st->next_candidate;
      int first_orphan = after;
      for (const auto& p : pending)
        if (!st->db->get_state(std::string{store::state_key::spec_prefix} + p.id))
          first_orphan = std::min(first_orphan, candidate_number(p.id));
      st->next_candidate = first_orphan;
      for (const auto& plan : st->strategy->select_candidates(st->round))
        if (!st->expanded.count(combo_key(plan.parent.id, plan.bottleneck_id, plan.model, plan.sample_idx)))
          plan_candidate(plan, st->round);
      st->next_candidate = std::max(st->next_candidate, after);
    }
    {
      // What the earlier sessions did, so that the progress line goes on from their totals.
      const auto prior = totals_of(st->prior_sessions);
      const auto by_cause = st->db->failures_by_cause();
      const long dups = by_cause.count("duplicate") ? static_cast<long>(by_cause.at("duplicate")) : 0;
      emit("resume", {{"from_round", st->round}, {store::state_key::round_done, round_done}, {"pending", pending.size()},
                      {"verified", st->db->count(store::program_status::verified) - 1},
                      {"failed", st->db->count(store::program_status::failed) - dups},
                      {"duplicates", dups},
                      {"prior", {{"sessions", prior.sessions}, {"wall_s", prior.wall_s}, {"device_s", prior.device_s},
                                 {"capacity_s", prior.capacity_s}}},
                      {"next_candidate", st->next_candidate}});
    }
    auto best = st->strategy->best();
    emit("initial", {{"initial_ms", num_or_null(st->initial)}, {"eager_ms", num_or_null(st->eager)},
                     {"compile_ms", num_or_null(st->compile)},
                     {"best_ms", best ? num_or_null(best->time_ms) : num_or_null(st->initial)}});
    if (st->async) return (*refill)();
    if (!st->queue.empty()) return (*pump)();
    if (st->round > round_done) {
      // The round was planned but every candidate of it had finished: close it.
      bool any = false;
      for (const auto& p : all) any = any || p.round == st->round;
      if (any) return end_round();
      return (*start_round)(st->round);
    }
    if (round_done == 0) return (*start_round)(1);
    if (st->strategy->should_terminate(round_done, ctx->cfg.max_rounds)) return finish(true, "");
    (*start_round)(round_done + 1);
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
        emit("run_start", {{"strategy", ctx->cfg.name}, {"search", st->strategy->name()},
                           {store::state_key::kernel_dir, ctx->kernel_dir}, {"vendor", ctx->vendor},
                           {"devices", ctx->device_ids}, {"gpu_name", ctx->gpu_name},
                           {"platform", ctx->cfg.platform.uniform()}, {"max_rounds", ctx->cfg.max_rounds},
                           {"schedule", st->async ? "async" : "rounds"}, {"num_workers", st->slots},
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
        a.duplicate_of = duplicate_of(q.code_hash, q.candidate_id);
        if (a.duplicate_of.empty() && !q.code_hash.empty())
          st->claims.emplace(q.code_hash, q.candidate_id);
        else if (auto it = st->profiles.find(a.duplicate_of); it != st->profiles.end())
          a.profile_json = it->second;
        return a;
      },
      [=](usage_atom, const std::string& json) {
        auto j = nlohmann::json::parse(json);
        store::llm_call_record c;
        c.purpose = j.value("purpose", "");
        c.model = j.value("model", "");
        c.provider = j.value("provider", "");
        c.tokens_in = j.value("tokens_in", 0L);
        c.tokens_out = j.value("tokens_out", 0L);
        c.cost_usd = j.value("cost_usd", 0.0);
        c.attempts = j.value("attempts", 1);
        c.ok = j.value("ok", false);
        if (!c.ok) c.error_kind = j.value("error_kind", "");
        c.candidate_id = j.value("candidate_id", "");
        c.latency_ms = j.value("latency_ms", 0.0);
        st->db->record_llm_call(c);
      },
  };
}

} // namespace kagent
