// manager: root supervisor of a run. Owns the program DB, runs the strategy round by round, hands
// candidates to gpu workers (least loaded first), supervises them, and writes the final artifacts.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <map>

#include "actors/actors.hpp"
#include "actors/strategy.hpp"
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
};

struct inflight_candidate {
  int worker = 0;
  candidate_spec spec;
};

struct manager_state {
  std::unique_ptr<store::program_db> db;
  std::unique_ptr<search_strategy> strategy;
  caf::actor reporter, llm;
  std::vector<worker_slot> workers;
  std::map<std::string, inflight_candidate> inflight;
  std::vector<program_entry> round_results;
  int round = 0;
  int next_candidate = 0;
  double eager = -1, compile = -1, initial = -1;
  bool finished = false;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
};

nlohmann::json num_or_null(double v) { return is_measured(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

} // namespace

caf::behavior manager_actor(caf::event_based_actor* self, context_ptr ctx, caf::actor waiter) {
  install_exception_handler(self, "manager");
  auto st = std::make_shared<manager_state>();
  const auto run_path = fs::path(ctx->run_path);
  st->db = std::make_unique<store::program_db>(store::program_db::open(run_path / "program.db"));
  st->strategy = make_strategy(ctx->cfg, ctx->cfg.llm.model.empty() ? ctx->cfg.openai_model : ctx->cfg.llm.model);
  st->reporter = self->spawn<caf::linked>(reporter_actor, ctx);
  st->llm = self->spawn<caf::linked>(llm_client_actor, ctx, caf::actor{self}, st->reporter);

  auto emit = [=](const std::string& type, const nlohmann::json& payload) {
    self->send(st->reporter, run_event{type, payload.dump()});
  };

  auto spawn_worker = [=](size_t k) {
    auto& w = st->workers[k];
    w.actor = self->spawn<caf::monitored>(gpu_worker_actor, ctx, static_cast<int>(k), w.device_id, st->llm,
                                          caf::actor{self});
  };
  for (size_t k = 0; k < ctx->device_ids.size(); ++k) {
    st->workers.push_back({caf::actor{}, ctx->device_ids[k], 0, 0});
    spawn_worker(k);
  }

  // ---- the end ---------------------------------------------------------------------------------
  auto finish = [=](bool success, const std::string& error) {
    if (st->finished) return;
    st->finished = true;
    store::run_directory rd = store::run_directory::open_existing(run_path);
    auto best = st->strategy->best();
    nlohmann::json s;
    s["success"] = success && best && best->time_ms >= 0;
    if (!error.empty()) s["error"] = error;
    s["strategy"] = ctx->cfg.name;
    s["search"] = st->strategy->name();
    s["kernel_dir"] = ctx->kernel_dir;
    s["run_dir"] = ctx->run_path;
    s["run_id"] = run_path.filename().string();
    s["vendor"] = ctx->vendor;
    s["devices"] = ctx->device_ids;
    s["gpu_name"] = ctx->gpu_name;
    s["eager_ms"] = num_or_null(st->eager);
    s["compile_ms"] = num_or_null(st->compile);
    s["initial_ms"] = num_or_null(st->initial);
    if (s["success"].get<bool>()) {
      s["best_ms"] = best->time_ms;
      s["best_program_id"] = best->id;
      rd.write_best_kernel(best->code);
      s["best_kernel_path"] = rd.best_kernel_path().string();
      if (st->initial > 0) s["speedup_vs_initial"] = st->initial / best->time_ms;
      if (st->eager > 0) s["speedup_vs_eager"] = st->eager / best->time_ms;
      if (st->compile > 0) s["speedup_vs_compile"] = st->compile / best->time_ms;
    } else {
      s["best_ms"] = nullptr;
    }
    s["rounds"] = st->round;
    s["candidates"] = st->db->count() - 1;  // minus the initial kernel
    s["verified"] = st->db->count(store::program_status::verified);
    s["failed"] = st->db->count(store::program_status::failed);
    s["failures_by_cause"] = st->db->failures_by_cause();
    nlohmann::json top = nlohmann::json::array();
    for (const auto& p : st->db->top_k_verified(5))
      top.push_back({{"program_id", p.id}, {"time_ms", num_or_null(p.time_ms.value_or(-1))}, {"generation", p.round}});
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
    s["llm"] = llm;
    s["wall_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - st->t0).count();
    rd.write_summary(s);
    st->db->set_state(store::state_key::status, s["success"].get<bool>() ? "finished" : "failed");
    emit("run_end", {{"success", s["success"]}, {"best_ms", s["best_ms"]}, {"error", error}});
    const int code = s["success"].get<bool>() ? 0 : 1;
    // A normal exit does not take linked or monitored actors with it in CAF 0.17: shut every child
    // down explicitly, or the actor system would wait for them forever.
    auto shutdown = [=] {
      for (auto& w : st->workers) self->send_exit(w.actor, caf::exit_reason::user_shutdown);
      self->send_exit(st->llm, caf::exit_reason::user_shutdown);
      self->send_exit(st->reporter, caf::exit_reason::user_shutdown);
      self->send(waiter, finish_atom::value, code, s.dump());
      self->quit();
    };
    self->request(st->reporter, std::chrono::seconds(30), finish_atom::value, s.dump())
        .then([=](caf::unit_t) { shutdown(); }, [=](caf::error&) { shutdown(); });
  };

  // ---- rounds ----------------------------------------------------------------------------------
  auto start_round = std::make_shared<std::function<void(int)>>();
  auto on_result = std::make_shared<std::function<void(const candidate_result&)>>();

  self->attach_functor([start_round, on_result](const caf::error&) {  // break the closure cycle
    *start_round = nullptr;
    *on_result = nullptr;
  });

  auto end_round = [=]() {
    st->strategy->update_with_results(st->round_results, st->round);
    st->round_results.clear();
    auto best = st->strategy->best();
    st->db->set_states({{store::state_key::round, std::to_string(st->round)},
                        {"strategy_state", st->strategy->save_state().dump()}});
    emit("round_end", {{"round", st->round},
                       {"best_ms", best ? num_or_null(best->time_ms) : nlohmann::json(nullptr)},
                       {"best_program_id", best ? best->id : ""}});
    if (st->strategy->should_terminate(st->round, ctx->cfg.max_rounds)) return finish(true, "");
    (*start_round)(st->round + 1);
  };

  *start_round = [=](int r) {
    st->round = r;
    auto plans = st->strategy->select_candidates(r);
    if (plans.empty()) return finish(true, "");
    emit("round_start", {{"round", r}, {"max_rounds", ctx->cfg.max_rounds}, {"candidates", plans.size()}});
    nlohmann::json history = nlohmann::json::array();
    for (const auto& a : st->db->list_attempts(5)) history.push_back(store::to_json(a));
    for (const auto& plan : plans) {
      candidate_spec spec;
      spec.id = fmt::format("r{}_c{}", r, st->next_candidate++);
      spec.parent_id = plan.parent.id;
      spec.round = r;
      spec.bottleneck_id = plan.bottleneck_id;
      spec.sample_idx = plan.sample_idx;
      spec.model = plan.model;
      spec.parent_code = plan.parent.code;
      spec.parent_time_ms = plan.parent.time_ms;
      spec.eager_ms = st->eager;
      spec.history_json = history.dump();
      spec.work_dir = (run_path / "candidates" / spec.id).string();
      // Least-loaded worker: a slow device does not hold the others' queue.
      size_t k = 0;
      for (size_t i = 1; i < st->workers.size(); ++i)
        if (st->workers[i].inflight < st->workers[k].inflight) k = i;
      auto& w = st->workers[k];
      ++w.inflight;
      st->inflight[spec.id] = {static_cast<int>(k), spec};
      store::program_record rec;
      rec.id = spec.id;
      rec.parent_id = spec.parent_id;
      rec.round = r;
      rec.worker = static_cast<int>(k);
      rec.gpu_id = w.device_id;
      rec.status = store::program_status::pending;
      rec.code = "";
      rec.model = spec.model;
      rec.bottleneck = fmt::format("direction {}", spec.bottleneck_id);
      st->db->insert_program(rec);
      const auto timeout = std::chrono::milliseconds(static_cast<long>(ctx->cfg.candidate_timeout_s * 1000));
      self->request(w.actor, timeout, spec)
          .then([=](const candidate_result& res) { (*on_result)(res); },
                [=](caf::error& err) {
                  // Anything but a timeout means the worker died (CAF answers its pending
                  // requests with the exit reason before the down_msg arrives). The down handler
                  // records those candidates and respawns the worker first, so that the next
                  // round never goes to the dead one.
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
    }
  };

  *on_result = [=](const candidate_result& res) {
    auto it = st->inflight.find(res.candidate_id);
    if (it == st->inflight.end()) return;  // already recorded (its worker went down first)
    auto& w = st->workers[static_cast<size_t>(it->second.worker)];
    --w.inflight;
    st->inflight.erase(it);
    store::program_update u;
    u.code = res.code;
    u.model = res.model;
    bool ok = res.ok;
    std::string cause = res.failure_cause, error = res.error;
    if (ok) {
      auto dup = st->db->find_by_code_hash(res.code_hash);
      if (dup && dup->id != res.candidate_id && dup->status == store::program_status::verified) {
        ok = false;
        cause = store::failure_cause::duplicate;
        error = "same compiled code as " + dup->id;
      }
    }
    u.code_hash = res.code_hash.empty() ? store::sha256_hex(res.code) : res.code_hash;
    if (ok) {
      u.status = store::program_status::verified;
      u.time_ms = res.time_ms;
      if (st->initial > 0) u.speedup = st->initial / res.time_ms;
      st->round_results.push_back({res.candidate_id, res.parent_id, res.code, res.time_ms, res.round, *u.code_hash});
    } else {
      u.status = store::program_status::failed;
      u.failure_cause = cause.empty() ? "unknown" : cause;
      u.error = error;
    }
    st->db->update_program(res.candidate_id, u);
    if (!res.attempt_json.empty()) {
      auto a = store::attempt_from_json(nlohmann::json::parse(res.attempt_json));
      a.program_id = res.candidate_id;
      st->db->insert_attempt(a);
    }
    auto best = st->strategy->best();
    double best_ms = best ? best->time_ms : -1;
    if (ok && (best_ms < 0 || res.time_ms < best_ms)) best_ms = res.time_ms;
    emit("candidate_result", {{"candidate_id", res.candidate_id}, {"parent_id", res.parent_id},
                              {"round", res.round},                {"gpu_id", res.gpu_id},
                              {"ok", ok},                          {"time_ms", ok ? nlohmann::json(res.time_ms) : nlohmann::json(nullptr)},
                              {"failure_cause", ok ? "" : u.failure_cause.value_or("")},
                              {"error", ok ? "" : error.substr(0, 500)}, {"best_ms", num_or_null(best_ms)}});
    bool round_done = true;
    for (const auto& [id, c] : st->inflight)
      if (c.spec.round == st->round) round_done = false;
    if (round_done && !st->finished) end_round();
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

  return {
      [=](start_atom) {
        emit("run_start", {{"strategy", ctx->cfg.name}, {"search", st->strategy->name()},
                           {"kernel_dir", ctx->kernel_dir}, {"vendor", ctx->vendor},
                           {"devices", ctx->device_ids}, {"gpu_name", ctx->gpu_name},
                           {"platform", ctx->cfg.platform.uniform()}, {"max_rounds", ctx->cfg.max_rounds}});
        for (const auto& n : ctx->notes) emit("note", {{"what", n}});
        store::program_record init;
        init.id = "initial";
        init.round = 0;
        init.worker = -1;
        init.gpu_id = ctx->device_ids.empty() ? 0 : ctx->device_ids.front();
        init.status = store::program_status::pending;
        init.code = ctx->input_code;
        st->db->insert_program(init);
        const auto work_dir = (run_path / "candidates" / "initial").string();
        fs::create_directories(work_dir);
        const auto timeout = std::chrono::milliseconds(
            static_cast<long>((ctx->test_timeout_s + 3 * ctx->cfg.benchmark_timeout_s) * 1000));
        self->request(st->workers.front().actor, timeout, evaluate{"initial", ctx->input_code, "initial", work_dir})
            .then(
                [=](const evaluation& e) {
                  st->eager = e.eager_ms;
                  st->compile = e.compile_ms;
                  store::program_update u;
                  u.code_hash = e.code_hash.empty() ? store::sha256_hex(ctx->input_code) : e.code_hash;
                  if (!e.verified) {
                    u.status = store::program_status::failed;
                    u.failure_cause = e.failure_cause.empty() ? "verification" : e.failure_cause;
                    u.error = e.error;
                    st->db->update_program("initial", u);
                    emit("error", {{"what", "initial kernel failed verification"}, {"error", e.error.substr(0, 2000)}});
                    return finish(false, "Initial kernel failed correctness verification: " + e.error.substr(0, 300));
                  }
                  // The measured initial time is stored (SPEC §14 B.87): parents carry real times.
                  st->initial = e.time_ms;
                  u.status = store::program_status::verified;
                  u.time_ms = e.time_ms;
                  st->db->update_program("initial", u);
                  st->db->set_state_json(store::state_key::eager_ms, num_or_null(st->eager));
                  st->db->set_state_json(store::state_key::compile_ms, num_or_null(st->compile));
                  st->db->set_state_json(store::state_key::initial_ms, num_or_null(st->initial));
                  emit("initial", {{"initial_ms", num_or_null(st->initial)}, {"eager_ms", num_or_null(st->eager)},
                                   {"compile_ms", num_or_null(st->compile)}, {"best_ms", num_or_null(st->initial)}});
                  st->strategy->initialize({"initial", "", ctx->input_code, is_measured(e.time_ms) ? e.time_ms : -1, 0,
                                            *u.code_hash});
                  (*start_round)(1);
                },
                [=](caf::error& err) {
                  finish(false, "Initial kernel could not be evaluated: " + to_string(err));
                });
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
