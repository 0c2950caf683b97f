// The candidate's steps (actors/candidate.hpp). Each continuation calls the next step by name.
#include "actors/candidate.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "actors/actors.hpp"
#include "platform/analysis/bottleneck.hpp"
#include "platform/analysis/reflexion.hpp"
#include "platform/llm/extract.hpp"
#include "platform/prompt/prompt.hpp"
#include "platform/search/tune.hpp"
#include "platform/store/util.hpp"

namespace fs = std::filesystem;

namespace kagent {

namespace {

/// The attempt's root cause and fix: the direction's first cause and that cause's first fix (SPEC
/// §1.3 step 4.4), read through the analysis area's own schema; null without a direction.
std::pair<nlohmann::json, nlohmann::json> cause_and_fix(const std::optional<bottleneck>& direction) {
  if (!direction || direction->root_causes.empty()) return {nullptr, nullptr};
  const auto& rc = direction->root_causes.front();
  return {rc.cause, rc.fixes.empty() ? nlohmann::json(nullptr) : nlohmann::json(rc.fixes.front().fix)};
}

} // namespace

caf::behavior candidate_actor(caf::stateful_actor<candidate_state>* self, context_ptr ctx, candidate_spec spec,
                              int device_id, caf::actor worker, device_actor_type device, llm_api llm) {
  return self->state.start(self, std::move(ctx), std::move(spec), device_id, std::move(worker), std::move(device),
                           std::move(llm));
}

caf::behavior candidate_state::start(caf::stateful_actor<candidate_state>* self, context_ptr ctx, candidate_spec spec,
                                     int device_id, caf::actor worker, device_actor_type device, llm_api llm) {
  install_exception_handler(self, "candidate");
  self_ = self;
  ctx_ = std::move(ctx);
  spec_ = std::move(spec);
  worker_ = std::move(worker);
  device_ = std::move(device);
  llm_ = std::move(llm);
  read_spec(device_id);
  choose_direction();
  open_attempt();
  return {
      [this](start_atom) {
        if (fault_requested(*ctx_, "candidate_throw", spec_.id))
          throw std::runtime_error("injected fault: candidate_throw:" + spec_.id);
        if (spec_.tuned()) return tune();
        prompt();
      },
  };
}

// ---- set-up ----------------------------------------------------------------------------------------

void candidate_state::read_spec(int device_id) {
  result_.candidate_id = spec_.id;
  result_.parent_id = spec_.parent_id;
  result_.round = spec_.round;
  result_.gpu_id = device_id;
  result_.model = spec_.model;
  fs::create_directories(spec_.work_dir);
  for (const auto& a : spec_.recent_attempts) attempts_.push_back(store::to_json(a));
  for (const auto& r : spec_.recent_reflexions) reflexions_.push_back(store::to_json(r));
  if (spec_.baseline) baseline_ = *spec_.baseline;
}

// The direction: bottleneck `bottleneck_id` of the parent's analysis (the analyzer was asked for as
// many as the strategy fans out, SPEC §14 B.83); the first one when it returned fewer (a synthetic
// session's gpu worker put its synthetic diagnosis there when the parent had none).
void candidate_state::choose_direction() {
  const auto& bs = baseline_.bottlenecks;
  const size_t want = static_cast<size_t>(std::max(1, spec_.bottleneck_id)) - 1;
  if (want < bs.size())
    primary_ = bs[want];
  else if (!bs.empty())
    primary_ = bs[0];
  if (!ctx_->cfg.bottleneck_override.empty() && primary_) primary_->category = ctx_->cfg.bottleneck_override;
  result_.bottleneck = primary_ ? primary_->category : "";
}

// The SPEC §2.7 attempt dict, filled in as the pipeline goes.
void candidate_state::open_attempt() {
  const auto [root_cause, recommended_fix] = cause_and_fix(primary_);
  attempt_ = {{"round_num", spec_.round},
              {"worker_id", spec_.worker_id},
              {"bottleneck_category", result_.bottleneck},
              {"root_cause", root_cause},
              {"recommended_fix", recommended_fix},
              {"config_changes", nlohmann::json::object()},
              {"time_before_ms", is_measured(spec_.parent_time_ms) ? nlohmann::json(spec_.parent_time_ms) : nlohmann::json(nullptr)},
              {"time_after_ms", nullptr},
              {"improvement_pct", nullptr},
              {"is_improvement", false},
              {"compute_sol_pct", nullptr},
              {"memory_sol_pct", nullptr},
              {"combined_sol_pct", nullptr},
              {"passed_verification", false},
              {"error_message", nullptr}};
}

// ---- the pipeline ----------------------------------------------------------------------------------

// A launch-constant variant of the parent: no prompt, no refinement, no reflexion. It is judged by
// the same trusted harness as any candidate; what it changes is its "bottleneck" in program.db.
void candidate_state::tune() {
  result_.bottleneck = search::variant_bottleneck(spec_.tune_label);
  write("tune.txt", spec_.tune_label + "\n");
  code_ = spec_.tuned_code;
  verify();
}

void candidate_state::prompt() {
  optimization_prompt_input in;
  in.kernel_code = spec_.parent_code;
  in.platform = ctx_->cfg.target_platform;
  in.gpu_name = ctx_->gpu_name;
  in.problem_code = ctx_->problem_code;
  in.eager_ms = spec_.eager_ms;
  in.current_best_ms = spec_.parent_time_ms;
  const auto& prof = baseline_.profile;
  in.roofline = prof && prof->roofline ? nlohmann::json(*prof->roofline) : nlohmann::json(nullptr);
  in.bottleneck = primary_ ? to_json(*primary_) : nlohmann::json(nullptr);
  in.attempts = attempts_;
  in.reflexions = reflexions_;
  ask("optimize", render_optimization_prompt(in, ctx_->cfg.templates, ctx_->install_root));
}

void candidate_state::ask(const std::string& purpose, const std::string& prompt_text) {
  const auto n = llm_calls_ + 1;
  write(fmt::format("{}_{}_prompt.txt", n, purpose), prompt_text);
  // A follow-up (the reply had no usable code) continues the conversation: the whole exchange is sent
  // (SPEC §14 B.96), so the model sees its own reply and why it was rejected.
  if (purpose.ends_with("_followup"))
    conversation_.push_back({"user", prompt_text});
  else
    conversation_ = {{"user", prompt_text}};
  const int max_tokens = purpose.rfind("refine", 0) == 0 ? 20000 : ctx_->cfg.llm.max_tokens;
  self_->request(llm_, caf::infinite, llm_request(purpose, conversation_, max_tokens, ctx_->cfg.high_reasoning_effort))
      .then([this, purpose, n](const completion& c) { on_reply(purpose, n, c); },
            [this](caf::error& err) { fail(failure_kind::llm, "llm_client unavailable: " + to_string(err)); });
}

void candidate_state::on_reply(const std::string& purpose, int n, const completion& c) {
  result_.llm_s += c.latency_s;
  if (!c.ok) return fail(failure_kind::llm, std::string(c.error_kind ? to_string(*c.error_kind) : "error") + ": " + c.error);
  write(fmt::format("{}_{}_reply.txt", n, purpose), c.text);
  auto x = extract_kernel(c.text, 100, static_cast<size_t>(ctx_->cfg.max_kernel_bytes));
  if (!x.ok) {
    // Rejected before any device work is spent on it; the reason goes back to the model.
    if (refinements_ < ctx_->cfg.max_refine_attempts) {
      ++refinements_;
      conversation_.push_back({"assistant", c.text});
      const std::string base = purpose.ends_with("_followup") ? purpose : purpose + "_followup";
      return ask(base, "Your reply could not be used: " + x.reason +
                           ". Reply with the complete kernel file in one ```python block that defines kernel_function.");
    }
    return fail(failure_kind::no_code, "the reply had no usable kernel: " + x.reason);
  }
  code_ = x.code;
  verify();
}

// Verify, then benchmark, as one device step (device_mode::verify_benchmark). `user_test: best` runs
// test.py for a candidate faster than the run's best: the best as it is when the step is sent (a kernel
// beaten while this candidate waited for its LLM reply no longer costs a test.py run), never above the
// best at dispatch; on a local device the backend also reads the run's recorded best when the timing
// ends.
void candidate_state::verify() {
  write("kernel.py", code_);
  self_->request(worker_, caf::infinite, best_atom::value)
      .then([this](double best_now) { evaluate_against(best_now); },
            [this](caf::error&) { evaluate_against(not_measured); });
}

void candidate_state::evaluate_against(double best_now) {
  double bar = spec_.best_ms;
  if (is_measured(best_now) && (!is_measured(bar) || best_now < bar)) bar = best_now;
  self_->request(device_, caf::infinite, evaluate{spec_.id, code_, device_mode::verify_benchmark, spec_.work_dir, bar})
      .then([this](const evaluation& e) { on_verified(e); },
            [this](caf::error& err) { fail(failure_kind::crash, "evaluator unavailable: " + to_string(err)); });
}

void candidate_state::on_verified(const evaluation& e) {
  if (e.verified) {
    attempt_["passed_verification"] = true;
    return on_benchmarked(e);
  }
  result_.device_s += e.wall_s;
  write(fmt::format("verify_{}.log", refinements_), e.error + "\n--- stderr ---\n" + e.stderr_tail);
  if (spec_.tuned()) return fail_verification(e);  // a variant that does not verify is simply dropped
  // Refine also after a ban violation (SPEC §14 B.99); crashes and timeouts too, since the next draft
  // may well avoid them. No "mock refinement" (B.98): an LLM failure fails the candidate.
  if (refinements_ < ctx_->cfg.max_refine_attempts) return refine(e);
  fail_verification(e);
}

void candidate_state::refine(const evaluation& e) {
  ++refinements_;
  refinement_prompt_input in;
  in.kernel_code = code_;
  in.platform = ctx_->cfg.target_platform;
  in.test_code = ctx_->test_code;
  // error_type left empty: render_refinement_prompt classifies it (SPEC §3.2).
  in.stderr_text = tail_text(e.error + (e.stderr_tail.empty() ? "" : "\n" + e.stderr_tail), 2000);
  in.stdout_text = tail_text(e.stdout_tail, 1000);
  in.history = failed_drafts_;
  failed_drafts_.push_back({{"kernel_code", code_.substr(0, 500)},
                            {"stderr", tail_text(e.error, 2000)},
                            {"stdout", tail_text(e.stdout_tail, 1000)}});
  while (failed_drafts_.size() > 8) failed_drafts_.erase(failed_drafts_.begin());
  ask("refine", render_refinement_prompt(in, ctx_->cfg.templates, ctx_->install_root));
}

void candidate_state::fail_verification(const evaluation& e) {
  attempt_["passed_verification"] = false;
  attempt_["error_message"] = tail_text(e.error, 2000);
  keep_attempt();
  // No reflexion after a failed verification (SPEC §14 B.111): there is no performance outcome to
  // reflect on; the failed attempt itself goes into the shared history.
  fail(e.failure_cause.value_or(failure_kind::verification),
         fmt::format("Verification failed after {} refinement attempts:\n{}", refinements_, tail_text(e.error, 2000)));
}

void candidate_state::on_benchmarked(const evaluation& be) {
  result_.device_s += be.wall_s;
  result_.user_test_s += be.user_test_s;
  if (!be.benchmarked) {
    attempt_["error_message"] = tail_text(be.error, 2000);
    keep_attempt();
    return fail(be.failure_cause.value_or(failure_kind::benchmark), be.error);
  }
  result_.time_ms = be.time_ms;
  result_.floor_pct = be.floor_pct;
  result_.time_spread_pct = be.time_spread_pct;
  result_.code_hash = be.code_hash;
  result_.code = code_;
  attempt_["time_after_ms"] = be.time_ms;
  attempt_["config_changes"] = config_changes(spec_.parent_code, code_);
  if (is_measured(spec_.parent_time_ms) && spec_.parent_time_ms > 0) {
    attempt_["improvement_pct"] = (spec_.parent_time_ms - be.time_ms) / spec_.parent_time_ms * 100.0;
    attempt_["is_improvement"] = be.time_ms < spec_.parent_time_ms;
  }
  dedup(be.code_hash);
}

// After the benchmark: a duplicate is recognised before any profile is taken (the manager knows every
// verified program and every candidate that asked before); a new kernel gets its SOL profile only
// under `profile: every`. Otherwise the search profiles it when it expands it as a parent.
void candidate_state::dedup(const std::string& code_hash) {
  if (code_hash.empty()) return profile_sol();
  self_->request(worker_, caf::infinite, dedup_query{spec_.id, code_hash})
      .then(
          [this](const dedup_answer& d) {
            if (d.duplicate_of.empty()) return profile_sol();
            if (d.profile) take_roofline(*d.profile);
            reflect();
          },
          [this](caf::error&) { profile_sol(); });
}

void candidate_state::profile_sol() {
  if (ctx_->cfg.profile != "every") return reflect();
  profile p;
  p.candidate_id = spec_.id;
  p.code = code_;
  p.label = "sol";
  p.work_dir = spec_.work_dir;
  p.profile_id = spec_.id + "_sol";
  // Through the worker, which owns the device's analysis mode.
  self_->request(worker_, caf::infinite, p)
      .then([this](const profile_result& pr) { on_profile(pr); }, [this](caf::error&) { reflect(); });
}

void candidate_state::on_profile(const profile_result& pr) {
  result_.device_s += pr.wall_s;
  if (pr.available && pr.ok) {
    result_.profile = pr.profile;
    write("sol_profile.json", nlohmann::json(pr.profile).dump(2));
    take_roofline(pr.profile);
  } else if (pr.available) {
    // A failed SOL profile never fails the candidate (SPEC §1.6); the profiler reported it to the
    // manager already.
    write("sol_profile_error.txt", pr.invocation + ": " + pr.error + "\n" + pr.output_tail);
  }
  reflect();
}

// Reflexion (SPEC §8.4): what the attempt taught; a failed or unparsable reply falls back to a
// reflexion built from the attempt's own numbers, and never fails the verified candidate.
void candidate_state::reflect() {
  if (spec_.tuned()) return succeed();
  keep_attempt();
  report_measured();
  const auto prompt_text = render_reflexion_prompt(attempt_, ctx_->cfg.templates, ctx_->install_root);
  const auto n = llm_calls_ + 1;
  write(fmt::format("{}_reflexion_prompt.txt", n), prompt_text);
  self_->request(llm_, caf::infinite, llm_request("reflexion", {{"user", prompt_text}}, 2048, false))
      .then(
          [this, n](const completion& c) {
            result_.llm_s += c.latency_s;
            if (c.ok) write(fmt::format("{}_reflexion_reply.txt", n), c.text);
            keep_reflexion(parse_reflexion_reply(c.ok ? c.text : "", attempt_));
            succeed();
          },
          [this](caf::error&) {
            keep_reflexion(parse_reflexion_reply("", attempt_));
            succeed();
          });
}

// The candidate is measured and its outcome can no longer change (a failed or unparsable reflexion
// never fails it): the manager records it now, so that a new best is published and expanded while
// the reflexion (20-120 s with a real LLM) runs. The reflexion follows in the candidate_result.
void candidate_state::report_measured() {
  candidate_measured m{result_};
  m.result.ok = true;
  if (m.result.code.empty()) m.result.code = code_;
  m.result.reflexion.clear();
  self_->send(worker_, std::move(m));
}

void candidate_state::succeed() {
  result_.ok = true;
  end();
}

void candidate_state::fail(failure_kind cause, const std::string& error) {
  result_.ok = false;
  result_.failure_cause = cause;
  result_.error = error;
  end();
}

void candidate_state::end() {
  if (result_.code.empty()) result_.code = code_;
  self_->send(worker_, result_);
  self_->quit();
}

// ---- helpers ---------------------------------------------------------------------------------------

complete candidate_state::llm_request(const std::string& purpose, const std::vector<chat_message>& messages,
                                      int max_tokens, bool high_effort) {
  ++llm_calls_;
  complete req;
  req.request_id = fmt::format("{}#{}", spec_.id, llm_calls_);
  req.purpose = purpose;
  req.model = spec_.model;
  req.messages = messages;
  req.max_tokens = max_tokens;
  req.high_effort = high_effort;
  req.candidate_id = spec_.id;
  return req;
}

// The roofline numbers of a profile go into the attempt (and so into the reflexion prompt).
void candidate_state::take_roofline(const kernel_profile& prof) {
  if (!prof.roofline) return;
  const auto& rl = *prof.roofline;
  if (rl.compute_sol_pct) attempt_["compute_sol_pct"] = *rl.compute_sol_pct;
  if (rl.memory_sol_pct) attempt_["memory_sol_pct"] = *rl.memory_sol_pct;
  attempt_["combined_sol_pct"] = rl.efficiency_pct;
}

// The attempt and its reflexion as the records program.db keeps (the manager fills in the program,
// worker and round). A dict that does not convert is left out of the history, never fatal.
void candidate_state::keep_attempt() {
  // A variant's outcome is a number, not a lesson: the prompts' short history (the last five
  // attempts) stays with what the LLM tried.
  if (spec_.tuned()) return;
  try {
    result_.attempt = {store::attempt_from_json(attempt_)};
  } catch (const std::exception& e) {
    result_.attempt.clear();
    write("history_error.txt", std::string{"attempt record left out: "} + e.what() + "\n");
  }
}

void candidate_state::keep_reflexion(const nlohmann::json& r) {
  try {
    result_.reflexion = {store::reflexion_from_json(r)};
  } catch (const std::exception& e) {
    result_.reflexion.clear();
    write("history_error.txt", std::string{"reflexion record left out: "} + e.what() + "\n");
  }
}

void candidate_state::write(const std::string& name, const std::string& text) const {
  store::write_file_atomic(fs::path(spec_.work_dir) / name, text);
}

} // namespace kagent
