// The parent analysis's steps (actors/analysis.hpp).
#include "actors/analysis.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "actors/actors.hpp"
#include "platform/analysis/bottleneck.hpp"
#include "platform/store/util.hpp"

namespace fs = std::filesystem;

namespace kagent {

caf::behavior parent_analysis_actor(caf::stateful_actor<analysis_state>* self, context_ptr ctx, caf::actor worker,
                                    llm_api llm) {
  return self->state.start(self, std::move(ctx), std::move(worker), std::move(llm));
}

caf::behavior analysis_state::start(caf::stateful_actor<analysis_state>* self, context_ptr ctx, caf::actor worker,
                                    llm_api llm) {
  install_exception_handler(self, "parent_analysis");
  self_ = self;
  ctx_ = std::move(ctx);
  worker_ = std::move(worker);
  llm_ = std::move(llm);
  return {[this](const analyze_parent& a) { return analyze(a); }};
}

caf::result<parent_analysis> analysis_state::analyze(const analyze_parent& a) {
  req_ = a;
  out_.parent_id = a.parent_id;
  requester_ = caf::actor_cast<caf::actor>(self_->current_sender());
  rp_ = self_->make_response_promise<parent_analysis>();
  if (a.known_profile) {
    // The parent was profiled when it was a candidate (its SOL profile): no second profile.
    profile_ = a.known_profile;
    profile_platform_ = profile_->platform;
    ask_llm({});
    return rp_;
  }
  if (ctx_->cfg.profile == "never") {
    // `profile: never`: the directions come from the code alone, as on a platform without a profiler.
    ask_llm({});
    return rp_;
  }
  profile p;
  p.candidate_id = a.parent_id;
  p.code = a.code;
  p.label = "baseline";
  p.work_dir = a.work_dir;
  p.profile_id = "baseline_" + a.parent_id;
  self_->request(worker_, caf::infinite, p)
      .then([this](const profile_result& pr) { on_profile(pr); },
            [this](caf::error& err) {
              write("profile_error.txt", to_string(err));
              ask_llm({});
            });
  return rp_;
}

void analysis_state::on_profile(const profile_result& pr) {
  out_.device_s += pr.wall_s;
  profile_platform_ = pr.profile.platform;
  if (pr.available && pr.ok) {
    profile_ = pr.profile;
    return ask_llm({});
  }
  if (pr.available) {
    out_.profile_failed = !pr.synthetic && !pr.abandoned;
    write("profile_error.txt", pr.invocation + ": " + pr.error + "\n" + pr.output_tail);
    // ROCm: a failed baseline profile means synthetic analysis (SPEC §7.4, §14 A.22), decided by the
    // profiler component's platform, never by a class (A.25).
    if (pr.profile.platform == "rocm")
      return synthetic(pr.synthetic ? pr.error : "rocprofv3 failed: " + pr.invocation + ": " + pr.error);
  }
  // No profiler on this platform (cpu, noop), or NVIDIA's profile failed: the LLM still proposes
  // directions, from the code alone.
  ask_llm({});
}

// `lead`: directions already decided (the synthetic diagnosis), placed first; the LLM is asked for the
// rest of the strategy's fan-out.
void analysis_state::ask_llm(std::vector<bottleneck> lead) {
  if (requester_) {
    self_->send(requester_, asking_atom::value, req_.parent_id);
    requester_ = caf::actor{};
  }
  bottleneck_prompt_input in;
  in.kernel_code = req_.code;
  in.platform = profile_platform_.empty() ? ctx_->cfg.platform.profiler : profile_platform_;
  in.gpu_name = ctx_->gpu_name;
  if (profile_) {
    in.metrics = profile_->metrics;
    if (profile_->roofline) in.roofline = *profile_->roofline;
  }
  in.num_bottlenecks = std::max(1, req_.num_bottlenecks - static_cast<int>(lead.size()));
  const auto text = render_bottleneck_prompt(in, ctx_->cfg.templates, ctx_->install_root);
  write("bottleneck_prompt.txt", text);
  complete c;
  c.request_id = "analysis:" + req_.parent_id;
  c.purpose = "bottleneck";
  c.model = req_.model;
  c.messages = {{"user", text}};
  c.max_tokens = 16384;
  c.high_effort = ctx_->cfg.high_reasoning_effort;
  c.candidate_id = req_.parent_id;
  self_->request(llm_, caf::infinite, c)
      .then([this, lead](const completion& r) { on_reply(lead, r); },
            [this, lead](caf::error& err) {
              write("bottleneck_error.txt", to_string(err));
              reply(lead, lead.empty() ? "none" : "synthetic");
            });
}

void analysis_state::on_reply(std::vector<bottleneck> lead, const completion& r) {
  out_.llm_s += r.latency_s;
  const std::string base = lead.empty() ? "" : "synthetic";
  if (!r.ok) {
    write("bottleneck_error.txt", std::string(r.error_kind ? to_string(*r.error_kind) : "error") + ": " + r.error);
    return reply(lead, lead.empty() ? "none" : base);
  }
  write("bottleneck_response.txt", r.text);
  const size_t decided = lead.size();
  for (auto& b : parse_bottleneck_reply(r.text)) {
    if (!ctx_->cfg.bottleneck_override.empty()) b.category = ctx_->cfg.bottleneck_override;
    lead.push_back(std::move(b));
  }
  if (decided == 0) return reply(lead, lead.empty() ? "none" : "llm");
  reply(lead, lead.size() > decided ? "synthetic+llm" : "synthetic");
}

// ROCm without a profile (SPEC §7.4): direction 1 is the synthetic diagnosis, built by the one helper;
// when the strategy fans out wider, the LLM proposes the other directions from the code alone, so that
// sibling candidates do not all repeat the same rewrite.
void analysis_state::synthetic(const std::string& reason) {
  std::vector<bottleneck> lead{synthetic_bottleneck(ctx_->cfg.bottleneck_override, reason)};
  if (req_.num_bottlenecks <= 1) return reply(lead, "synthetic");
  profile_.reset();
  ask_llm(lead);
}

void analysis_state::reply(std::vector<bottleneck> bottlenecks, const std::string& source) {
  out_.analysis = {profile_, std::move(bottlenecks), source};
  write("analysis.json", to_json(out_.analysis).dump(2));
  rp_.deliver(out_);
  self_->quit();
}

void analysis_state::write(const std::string& name, const std::string& text) const {
  fs::create_directories(req_.work_dir);
  store::write_file_atomic(fs::path(req_.work_dir) / name, text);
}

} // namespace kagent
