// gpu_worker, evaluator, profiler and candidate actors: everything that happens on one device.
#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "actors/actors.hpp"
#include "platform/common/stop.hpp"
#include "platform/device/device_backend.hpp"
#include "platform/gpu/specs.hpp"
#include "platform/llm/extract.hpp"
#include "platform/analysis/bottleneck.hpp"
#include "platform/analysis/reflexion.hpp"
#include "platform/prompt/prompt.hpp"
#include "platform/store/util.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace kagent {

void install_exception_handler(caf::scheduled_actor* self, const char* who) {
  std::string name = who;
  self->set_exception_handler([name](caf::scheduled_actor*, std::exception_ptr& ep) -> caf::error {
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      return caf::make_error(errc::actor_failed, name + ": " + e.what());
    } catch (...) {
      return caf::make_error(errc::actor_failed, name + ": unknown exception");
    }
  });
}

std::mutex& device_mutex(int device_id) {
  // Never destroyed: detached actor threads may still hold one while the process exits.
  static auto* table = new std::map<int, std::unique_ptr<std::mutex>>();
  static std::mutex guard;
  std::lock_guard<std::mutex> lk(guard);
  auto& m = (*table)[device_id];
  if (!m) m = std::make_unique<std::mutex>();
  return *m;
}

bool fault_requested(const run_context& ctx, const std::string& what, const std::string& target) {
  if (ctx.inject_fault.empty()) return false;
  std::string item;
  std::stringstream ss{ctx.inject_fault};
  while (std::getline(ss, item, ','))
    if (item == what + ":" + target || item == what + ":*") return true;
  return false;
}

// ---------------------------------------------------------------------------------------------
// evaluator: device work through platform/device, serialised by the actor's mailbox and the device lock

namespace {

device_settings settings_for(const run_context& ctx, int device_id) {
  device_settings s;
  s.python = ctx.python;
  s.install_root = ctx.install_root;
  s.problem_path = ctx.problem_path;
  s.run_path = ctx.run_path;
  s.vendor = ctx.vendor;
  s.child_env = ctx.child_env;
  s.verifier = ctx.cfg.platform.verifier;
  s.isolation = ctx.cfg.isolation;
  s.test_timeout_s = ctx.test_timeout_s;
  s.benchmark_timeout_s = ctx.cfg.benchmark_timeout_s;
  s.benchmark_warmup = static_cast<int>(ctx.cfg.benchmark_warmup);
  s.benchmark_repeat = static_cast<int>(ctx.cfg.benchmark_repeat);
  s.device_id = device_id;
  s.dtype = ctx.cfg.dtype;
  s.rtol = ctx.cfg.rtol.value_or(-1);
  s.atol = ctx.cfg.atol.value_or(-1);
  s.user_test = ctx.cfg.user_test;
  s.user_test_timeout_s = ctx.cfg.user_test_timeout_s;
  s.test_path = ctx.test_path;
  s.sandbox_prefix = ctx.sandbox_prefix;
  if (auto spec = find_gpu_specs(ctx.gpu_name)) s.peak_bandwidth_gbps = spec->peak_memory_bw_gbps;
  return s;
}

evaluation to_message(const device_result& r) {
  evaluation e;
  e.candidate_id = r.candidate_id;
  e.verified = r.verified;
  e.benchmarked = r.benchmarked;
  e.time_ms = r.time_ms >= 0 ? r.time_ms : not_measured;
  e.time_spread_pct = r.time_spread_pct;
  e.eager_ms = r.eager_ms >= 0 ? r.eager_ms : not_measured;
  e.compile_ms = r.compile_ms >= 0 ? r.compile_ms : not_measured;
  e.error = r.error;
  e.failure_cause = r.failure_cause;
  e.code_hash = r.code_hash;
  e.floor_pct = r.floor_pct >= 0 ? r.floor_pct : not_measured;
  e.stdout_tail = r.stdout_tail;
  e.stderr_tail = r.stderr_tail;
  e.wall_s = r.wall_s;
  return e;
}

struct evaluator_state {
  std::unique_ptr<device_backend> backend;
};

} // namespace

caf::behavior evaluator_actor(caf::event_based_actor* self, context_ptr ctx, int device_id) {
  install_exception_handler(self, "evaluator");
  auto st = std::make_shared<evaluator_state>();
  st->backend = make_device_backend(settings_for(*ctx, device_id));
  return {
      [=](const evaluate& req) -> evaluation {
        // The backend reports child failures in the evaluation; anything thrown here is our own
        // fault (a broken run directory, say) and must fail this request, not the device session.
        // A candidate whose deadline passed (cancel_work) has its device work killed at once, and
        // work still queued for the device is not started: the device goes to the next candidate.
        std::optional<work_scope> scope;
        if (req.mode != "initial" && !req.candidate_id.empty()) scope.emplace(req.candidate_id);
        try {
          std::lock_guard<std::mutex> device(device_mutex(device_id));
          if (scope && should_give_up()) {
            evaluation e;
            e.candidate_id = req.candidate_id;
            e.failure_cause = "timeout";
            e.error = "cancelled before it reached the device";
            return e;
          }
          device_request dr{req.candidate_id, req.code, req.mode, req.work_dir};
          dr.best_ms = req.best_ms;
          if (req.mode == "initial") {
            // The starting kernel's steps go to the manager (the sender: delegation keeps it), whose
            // progress line shows them during the long initial phase.
            auto to = caf::actor_cast<caf::actor>(self->current_sender());
            if (to) dr.on_step = [self, to](const std::string& what) { self->send(to, step_atom::value, what); };
          }
          return to_message(st->backend->run(dr));
        } catch (const std::exception& ex) {
          evaluation e;
          e.candidate_id = req.candidate_id;
          e.failure_cause = "harness";
          e.error = std::string{"evaluator: "} + ex.what();
          return e;
        }
      },
  };
}

// ---------------------------------------------------------------------------------------------
// candidate (SPEC §1.3, one round): direction from the parent's cached analysis -> optimization
// prompt -> LLM -> code -> verify (refine) -> benchmark -> SOL profile -> reflexion -> result

namespace {

struct candidate_state {
  candidate_spec spec;
  candidate_result result;
  std::string code;
  int refinements = 0;
  int llm_calls = 0;
  std::vector<chat_message> conversation;
  nlohmann::json baseline;       ///< the parent's analysis (profile, bottlenecks, source)
  nlohmann::json primary;        ///< the direction this candidate follows (bottleneck JSON) or null
  nlohmann::json attempts = nlohmann::json::array();
  nlohmann::json reflexions = nlohmann::json::array();
  nlohmann::json failed_drafts = nlohmann::json::array();  ///< refinement history
  nlohmann::json attempt;        ///< SPEC §2.7 attempt dict under construction
};

/// The attempt's root cause and fix: the direction's first cause and that cause's first fix (SPEC
/// §1.3 step 4.4), read through the analysis area's own schema; null without a direction.
std::pair<nlohmann::json, nlohmann::json> cause_and_fix(const nlohmann::json& direction) {
  if (!direction.is_object()) return {nullptr, nullptr};
  const auto b = bottleneck_from_json(direction);
  if (b.root_causes.empty()) return {nullptr, nullptr};
  const auto& rc = b.root_causes.front();
  return {rc.cause, rc.fixes.empty() ? nlohmann::json(nullptr) : nlohmann::json(rc.fixes.front().fix)};
}

} // namespace

caf::behavior candidate_actor(caf::event_based_actor* self, context_ptr ctx, candidate_spec spec, int device_id,
                              caf::actor worker, caf::actor evaluator, caf::actor profiler, caf::actor llm) {
  install_exception_handler(self, "candidate");
  auto st = std::make_shared<candidate_state>();
  st->spec = spec;
  st->result.candidate_id = spec.id;
  st->result.parent_id = spec.parent_id;
  st->result.round = spec.round;
  st->result.gpu_id = device_id;
  st->result.model = spec.model;
  fs::create_directories(spec.work_dir);
  if (!spec.history_json.empty()) {
    auto h = nlohmann::json::parse(spec.history_json, nullptr, false);
    if (h.is_object()) {
      if (h.contains("attempts") && h["attempts"].is_array()) st->attempts = h["attempts"];
      if (h.contains("reflexions") && h["reflexions"].is_array()) st->reflexions = h["reflexions"];
    }
  }
  st->baseline = spec.baseline_json.empty() ? nlohmann::json::object()
                                            : nlohmann::json::parse(spec.baseline_json, nullptr, false);
  if (!st->baseline.is_object()) st->baseline = nlohmann::json::object();
  {
    // The direction: bottleneck `bottleneck_id` of the parent's analysis (the analyzer was asked for
    // as many as the strategy fans out, SPEC §14 B.83); the first one when it returned fewer; the
    // synthetic diagnosis when this device's session is synthetic and there is none.
    const auto& bs = st->baseline.contains("bottlenecks") && st->baseline["bottlenecks"].is_array()
                         ? st->baseline["bottlenecks"]
                         : nlohmann::json::array();
    const size_t want = static_cast<size_t>(std::max(1, spec.bottleneck_id)) - 1;
    if (want < bs.size())
      st->primary = bs[want];
    else if (!bs.empty())
      st->primary = bs[0];
    else if (spec.synthetic)
      st->primary = to_json(synthetic_bottleneck(ctx->cfg.bottleneck_override, "this device's profiler failed earlier in the run"));
    if (!ctx->cfg.bottleneck_override.empty() && st->primary.is_object()) st->primary["category"] = ctx->cfg.bottleneck_override;
  }
  st->result.bottleneck = st->primary.is_object() ? st->primary.value("category", "") : "";
  const auto [root_cause, recommended_fix] = cause_and_fix(st->primary);
  st->attempt = {{"round_num", spec.round},
                 {"worker_id", spec.worker_id},
                 {"bottleneck_category", st->result.bottleneck},
                 {"root_cause", root_cause},
                 {"recommended_fix", recommended_fix},
                 {"config_changes", nlohmann::json::object()},
                 {"time_before_ms", is_measured(spec.parent_time_ms) ? nlohmann::json(spec.parent_time_ms) : nlohmann::json(nullptr)},
                 {"time_after_ms", nullptr},
                 {"improvement_pct", nullptr},
                 {"is_improvement", false},
                 {"compute_sol_pct", nullptr},
                 {"memory_sol_pct", nullptr},
                 {"combined_sol_pct", nullptr},
                 {"passed_verification", false},
                 {"error_message", nullptr}};

  auto write = [=](const std::string& name, const std::string& text) {
    store::write_file_atomic(fs::path(st->spec.work_dir) / name, text);
  };
  auto finish = [=](bool ok, const std::string& cause, const std::string& error) {
    st->result.ok = ok;
    st->result.failure_cause = ok ? "" : cause;
    st->result.error = error;
    if (st->result.code.empty()) st->result.code = st->code;
    self->send(worker, st->result);
    self->quit();
  };
  auto profile_of = [=]() {
    return st->baseline.contains("profile") && st->baseline["profile"].is_object() ? st->baseline["profile"]
                                                                                  : nlohmann::json(nullptr);
  };

  // Forward declarations through shared function objects: the pipeline loops (refinement).
  auto ask = std::make_shared<std::function<void(const std::string&, const std::string&)>>();
  auto on_code = std::make_shared<std::function<void()>>();
  auto reflect = std::make_shared<std::function<void()>>();
  auto after_benchmark = std::make_shared<std::function<void(const std::string&)>>();

  // The steps refer to each other (refinement loops back to the LLM): a reference cycle that also
  // holds actor handles. Break it when the actor terminates, or the evaluator's detached thread
  // would wait forever for its last reference to go.
  self->attach_functor([ask, on_code, reflect, after_benchmark](const caf::error&) {
    *ask = nullptr;
    *on_code = nullptr;
    *reflect = nullptr;
    *after_benchmark = nullptr;
  });

  auto llm_request = [=](const std::string& purpose, const std::vector<chat_message>& messages, int max_tokens,
                         bool high_effort) {
    ++st->llm_calls;
    complete req;
    req.request_id = fmt::format("{}#{}", st->spec.id, st->llm_calls);
    req.purpose = purpose;
    req.model = st->spec.model;
    req.messages = messages;
    req.max_tokens = max_tokens;
    req.high_effort = high_effort;
    req.candidate_id = st->spec.id;
    return req;
  };

  *ask = [=](const std::string& purpose, const std::string& prompt_text) {
    const auto n = st->llm_calls + 1;
    write(fmt::format("{}_{}_prompt.txt", n, purpose), prompt_text);
    // A follow-up (the reply had no usable code) continues the conversation: the whole exchange is
    // sent (SPEC §14 B.96), so the model sees its own reply and why it was rejected.
    if (purpose.ends_with("_followup"))
      st->conversation.push_back({"user", prompt_text});
    else
      st->conversation = {{"user", prompt_text}};
    const int max_tokens = purpose.rfind("refine", 0) == 0 ? 20000 : ctx->cfg.llm.max_tokens;
    self->request(llm, caf::infinite, llm_request(purpose, st->conversation, max_tokens, ctx->cfg.high_reasoning_effort))
        .then(
            [=](const completion& c) {
              st->result.llm_s += c.latency_s;
              if (!c.ok) return finish(false, "llm", c.error_kind + ": " + c.error);
              write(fmt::format("{}_{}_reply.txt", n, purpose), c.text);
              auto x = extract_kernel(c.text, 100, static_cast<size_t>(ctx->cfg.max_kernel_bytes));
              if (!x.ok) {
                // Rejected before any device work is spent on it; the reason goes back to the model.
                if (st->refinements < ctx->cfg.max_refine_attempts) {
                  ++st->refinements;
                  st->conversation.push_back({"assistant", c.text});
                  const std::string base = purpose.ends_with("_followup") ? purpose : purpose + "_followup";
                  (*ask)(base, "Your reply could not be used: " + x.reason +
                                   ". Reply with the complete kernel file in one ```python block that defines "
                                   "kernel_function.");
                  return;
                }
                return finish(false, "no_code", "the reply had no usable kernel: " + x.reason);
              }
              st->code = x.code;
              (*on_code)();
            },
            [=](caf::error& err) { finish(false, "llm", "llm_client unavailable: " + to_string(err)); });
  };

  // The attempt and its reflexion as the records program.db keeps (the manager fills in the program,
  // worker and round). A dict that does not convert is left out of the history, never fatal.
  auto keep_attempt = [=]() {
    try {
      st->result.attempt = {store::attempt_from_json(st->attempt)};
    } catch (const std::exception& e) {
      st->result.attempt.clear();
      write("history_error.txt", std::string{"attempt record left out: "} + e.what() + "\n");
    }
  };
  auto keep_reflexion = [=](const nlohmann::json& r) {
    try {
      st->result.reflexion = {store::reflexion_from_json(r)};
    } catch (const std::exception& e) {
      st->result.reflexion.clear();
      write("history_error.txt", std::string{"reflexion record left out: "} + e.what() + "\n");
    }
  };

  auto fail_verification = [=](const evaluation& e) {
    st->attempt["passed_verification"] = false;
    st->attempt["error_message"] = tail_text(e.error, 2000);
    keep_attempt();
    // No reflexion after a failed verification (SPEC §14 B.111): there is no performance outcome to
    // reflect on; the failed attempt itself goes into the shared history.
    finish(false, e.failure_cause.empty() ? "verification" : e.failure_cause,
           fmt::format("Verification failed after {} refinement attempts:\n{}", st->refinements, tail_text(e.error, 2000)));
  };

  *on_code = [=]() {
    write("kernel.py", st->code);
    evaluate v{st->spec.id, st->code, "verify", st->spec.work_dir};
    self->request(evaluator, caf::infinite, v)
        .then(
            [=](const evaluation& e) {
              st->result.device_s += e.wall_s;
              if (!e.verified) {
                write(fmt::format("verify_{}.log", st->refinements), e.error + "\n--- stderr ---\n" + e.stderr_tail);
                // Refine also after a ban violation (SPEC §14 B.99); crashes and timeouts too, since
                // the next draft may well avoid them. No "mock refinement" (B.98): an LLM failure
                // fails the candidate.
                if (st->refinements < ctx->cfg.max_refine_attempts) {
                  ++st->refinements;
                  refinement_prompt_input in;
                  in.kernel_code = st->code;
                  in.platform = ctx->cfg.target_platform;
                  in.test_code = ctx->test_code;
                  // error_type left empty: render_refinement_prompt classifies it (SPEC §3.2).
                  in.stderr_text = tail_text(e.error + (e.stderr_tail.empty() ? "" : "\n" + e.stderr_tail), 2000);
                  in.stdout_text = tail_text(e.stdout_tail, 1000);
                  in.history = st->failed_drafts;
                  st->failed_drafts.push_back({{"kernel_code", st->code.substr(0, 500)},
                                               {"stderr", tail_text(e.error, 2000)},
                                               {"stdout", tail_text(e.stdout_tail, 1000)}});
                  while (st->failed_drafts.size() > 8) st->failed_drafts.erase(st->failed_drafts.begin());
                  (*ask)("refine", render_refinement_prompt(in, ctx->cfg.templates, ctx->install_root));
                  return;
                }
                return fail_verification(e);
              }
              st->attempt["passed_verification"] = true;
              evaluate b{st->spec.id, st->code, "benchmark", st->spec.work_dir, st->spec.best_ms};
              self->request(evaluator, caf::infinite, b)
                  .then(
                      [=](const evaluation& be) {
                        st->result.device_s += be.wall_s;
                        if (!be.benchmarked) {
                          st->attempt["error_message"] = tail_text(be.error, 2000);
                          keep_attempt();
                          return finish(false, be.failure_cause.empty() ? "benchmark" : be.failure_cause, be.error);
                        }
                        st->result.time_ms = be.time_ms;
                        st->result.floor_pct = be.floor_pct;
                        st->result.time_spread_pct = be.time_spread_pct;
                        st->result.code_hash = be.code_hash;
                        st->result.code = st->code;
                        st->attempt["time_after_ms"] = be.time_ms;
                        st->attempt["config_changes"] = config_changes(st->spec.parent_code, st->code);
                        if (is_measured(st->spec.parent_time_ms) && st->spec.parent_time_ms > 0) {
                          st->attempt["improvement_pct"] =
                              (st->spec.parent_time_ms - be.time_ms) / st->spec.parent_time_ms * 100.0;
                          st->attempt["is_improvement"] = be.time_ms < st->spec.parent_time_ms;
                        }
                        (*after_benchmark)(be.code_hash);
                      },
                      [=](caf::error& err) { finish(false, "crash", "evaluator unavailable: " + to_string(err)); });
            },
            [=](caf::error& err) { finish(false, "crash", "evaluator unavailable: " + to_string(err)); });
  };

  // The roofline numbers of a profile go into the attempt (and so into the reflexion prompt).
  auto take_roofline = [=](const nlohmann::json& prof) {
    if (!prof.is_object() || !prof.contains("roofline") || !prof["roofline"].is_object()) return;
    const auto& rl = prof["roofline"];
    for (const char* k : {"compute_sol_pct", "memory_sol_pct"})
      if (rl.contains(k)) st->attempt[k] = rl[k];
    if (rl.contains("efficiency_pct")) st->attempt["combined_sol_pct"] = rl["efficiency_pct"];
  };

  // After the benchmark: a duplicate is recognised before any profile is taken (the manager knows
  // every verified program and every candidate that asked before); a new kernel gets its SOL profile
  // only under `profile: every`. Otherwise the search profiles it when it expands it as a parent.
  *after_benchmark = [=](const std::string& code_hash) {
    // Synthetic session: no profiler call at all on this device (SPEC §14 A.23).
    if (st->spec.synthetic) return (*reflect)();
    auto profile_it = [=]() {
      if (ctx->cfg.profile != "every") return (*reflect)();
      profile p;
      p.candidate_id = st->spec.id;
      p.code = st->code;
      p.label = "sol";
      p.work_dir = st->spec.work_dir;
      p.profile_id = st->spec.id + "_sol";
      self->request(profiler, caf::infinite, p)
          .then(
              [=](const profile_result& pr) {
                st->result.device_s += pr.wall_s;
                if (pr.available && pr.ok) {
                  nlohmann::json prof = profile_to_json(pr);
                  st->result.profile_json = prof.dump();
                  write("sol_profile.json", prof.dump(2));
                  take_roofline(prof);
                } else if (pr.available) {
                  // A failed SOL profile never fails the candidate (SPEC §1.6); the profiler
                  // reported it to the manager already.
                  write("sol_profile_error.txt", pr.invocation + ": " + pr.error + "\n" + pr.output_tail);
                }
                (*reflect)();
              },
              [=](caf::error&) { (*reflect)(); });
    };
    if (code_hash.empty()) return profile_it();
    self->request(worker, caf::infinite, dedup_query{st->spec.id, code_hash})
        .then(
            [=](const dedup_answer& d) {
              if (d.duplicate_of.empty()) return profile_it();
              if (!d.profile_json.empty()) take_roofline(nlohmann::json::parse(d.profile_json, nullptr, false));
              (*reflect)();
            },
            [=](caf::error&) { profile_it(); });
  };

  // Reflexion (SPEC §8.4): what the attempt taught; a failed or unparsable reply falls back to a
  // reflexion built from the attempt's own numbers, and never fails the verified candidate.
  *reflect = [=]() {
    keep_attempt();
    const auto prompt_text = render_reflexion_prompt(st->attempt, ctx->cfg.templates, ctx->install_root);
    const auto n = st->llm_calls + 1;
    write(fmt::format("{}_reflexion_prompt.txt", n), prompt_text);
    self->request(llm, caf::infinite, llm_request("reflexion", {{"user", prompt_text}}, 2048, false))
        .then(
            [=](const completion& c) {
              st->result.llm_s += c.latency_s;
              if (c.ok) write(fmt::format("{}_reflexion_reply.txt", n), c.text);
              keep_reflexion(parse_reflexion_reply(c.ok ? c.text : "", st->attempt));
              finish(true, "", "");
            },
            [=](caf::error&) {
              keep_reflexion(parse_reflexion_reply("", st->attempt));
              finish(true, "", "");
            });
  };

  return {
      [=](start_atom) {
        if (fault_requested(*ctx, "candidate_throw", st->spec.id))
          throw std::runtime_error("injected fault: candidate_throw:" + st->spec.id);
        optimization_prompt_input in;
        in.kernel_code = st->spec.parent_code;
        in.platform = ctx->cfg.target_platform;
        in.gpu_name = ctx->gpu_name;
        in.problem_code = ctx->problem_code;
        in.eager_ms = st->spec.eager_ms;
        in.current_best_ms = st->spec.parent_time_ms;
        const auto prof = profile_of();
        in.roofline = prof.is_object() && prof.contains("roofline") ? prof["roofline"] : nlohmann::json(nullptr);
        in.bottleneck = st->primary;
        in.attempts = st->attempts;
        in.reflexions = st->reflexions;
        (*ask)("optimize", render_optimization_prompt(in, ctx->cfg.templates, ctx->install_root));
      },
  };
}

// ---------------------------------------------------------------------------------------------
// gpu_worker: the session of one device

namespace {
/// A candidate's deadline (candidate_timeout_s) expired: the worker ends it.
using deadline_atom = caf::atom_constant<caf::atom("deadline")>;

struct gpu_worker_state {
  caf::actor evaluator;
  caf::actor profiler;
  std::map<caf::actor_addr, std::pair<std::string, caf::response_promise>> running;  // candidate -> (id, promise)
  std::map<std::string, caf::actor> handles;  // candidate id -> its actor, while it runs
  std::map<std::string, candidate_spec> specs;
  bool synthetic = false;
};
} // namespace

caf::behavior gpu_worker_actor(caf::event_based_actor* self, context_ptr ctx, int worker_index, int device_id,
                               caf::actor llm, caf::actor manager) {
  install_exception_handler(self, "gpu_worker");
  auto st = std::make_shared<gpu_worker_state>();
  // Detached: the evaluator and the profiler block on child processes and must not hold a
  // scheduler thread. Linked: if this worker dies they go with it (and their children with them).
  st->evaluator = self->spawn<caf::detached + caf::linked>(evaluator_actor, ctx, device_id);
  st->profiler = self->spawn<caf::detached + caf::linked>(profiler_actor, ctx, device_id, manager);
  (void)worker_index;

  self->set_down_handler([=](caf::down_msg& dm) {
    auto it = st->running.find(dm.source);
    if (it == st->running.end()) return;
    auto [id, rp] = it->second;
    st->running.erase(it);
    st->handles.erase(id);
    if (!dm.reason) return;  // a normal exit already delivered its result
    const auto& spec = st->specs[id];
    candidate_result r;
    r.candidate_id = id;
    r.parent_id = spec.parent_id;
    r.round = spec.round;
    r.gpu_id = device_id;
    r.model = spec.model;
    r.failure_cause = "actor_down";
    r.error = "candidate actor failed: " + to_string(dm.reason);
    rp.deliver(r);
    st->specs.erase(id);
  });

  return {
      [=](const candidate_spec& in) -> caf::result<candidate_result> {
        if (fault_requested(*ctx, "gpu_worker_throw", in.id))
          throw std::runtime_error("injected fault: gpu_worker_throw:" + in.id);
        auto spec = in;
        spec.synthetic = spec.synthetic || st->synthetic;
        auto rp = self->make_response_promise<candidate_result>();
        auto c = self->spawn<caf::monitored>(candidate_actor, ctx, spec, device_id, caf::actor{self}, st->evaluator,
                                             st->profiler, llm);
        st->running.emplace(c.address(), std::make_pair(spec.id, rp));
        st->specs[spec.id] = spec;
        st->handles[spec.id] = c;
        self->send(c, start_atom::value);
        // The deadline is kept here, where the candidate lives: when it expires the candidate is
        // killed, so it starts no further LLM call, device step or file write, and what it has in
        // flight (an LLM call, a device step, a profile) is cancelled.
        self->delayed_send(self, std::chrono::milliseconds(static_cast<long long>(ctx->cfg.candidate_timeout_s * 1000)),
                           deadline_atom::value, spec.id);
        return rp;
      },
      [=](deadline_atom, const std::string& id) {
        auto h = st->handles.find(id);
        if (h == st->handles.end()) return;  // it ended in time
        auto c = h->second;
        st->handles.erase(h);
        auto it = st->running.find(c.address());
        if (it == st->running.end()) return;
        auto rp = it->second.second;
        st->running.erase(it);
        const auto spec = st->specs[id];
        st->specs.erase(id);
        // Its LLM calls, device work and profiles are given up (their waits watch cancel_work), so
        // the device is free for the next candidate at once.
        cancel_work(id);
        self->send_exit(c, caf::exit_reason::kill);
        candidate_result r;
        r.candidate_id = id;
        r.parent_id = spec.parent_id;
        r.round = spec.round;
        r.gpu_id = device_id;
        r.model = spec.model;
        r.failure_cause = "timeout";
        r.error = fmt::format("candidate exceeded candidate_timeout_s={}", ctx->cfg.candidate_timeout_s);
        rp.deliver(r);
      },
      [=](interrupt_atom, int) {
        // The run is stopping: every candidate of this device ends now, with no result (the manager
        // leaves them pending for --resume). Their child processes are killed by the runtime next.
        for (auto& [id, c] : st->handles) self->send_exit(c, caf::exit_reason::kill);
        st->handles.clear();
        st->running.clear();
        st->specs.clear();
        return true;
      },
      [=](const evaluate& e) {
        // The manager's own device work (the initial kernel and the references) queues behind the
        // candidates' on the same evaluator, so one device never runs two timings at once.
        return self->delegate(st->evaluator, e);
      },
      [=](const profile& p) {
        // Baseline profiles for the manager's cache run on this device's profiler, in its queue.
        return self->delegate(st->profiler, p);
      },
      [=](const dedup_query& q) {
        // From one of our candidates: only the manager knows every program of the run.
        return self->delegate(manager, q);
      },
      [=](mode_atom, const std::string& mode) {
        // From the manager (supervision): this device's session switches mode for the rest of the run.
        if (mode == "synthetic") st->synthetic = true;
        self->send(st->profiler, mode_atom::value, mode);
      },
      [=](const candidate_result& r) {
        // From one of our candidates: fulfil the manager's request.
        for (auto it = st->running.begin(); it != st->running.end(); ++it) {
          if (it->second.first != r.candidate_id) continue;
          auto rp = it->second.second;
          st->running.erase(it);
          st->specs.erase(r.candidate_id);
          st->handles.erase(r.candidate_id);
          rp.deliver(r);
          return;
        }
      },
  };
}

} // namespace kagent
