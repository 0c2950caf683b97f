// parent_analysis: one profile and one bottleneck analysis per distinct parent, for the manager's
// baseline cache (SPEC §1.2 step 7.2, §7). Every candidate expanding the parent shares the result, and
// the analyzer is asked for as many directions as the strategy fans out (SPEC §14 B.83), so sibling
// candidates follow distinct directions.
#include <fmt/format.h>

#include <filesystem>

#include "actors/actors.hpp"
#include "platform/analysis/bottleneck.hpp"
#include "platform/store/util.hpp"

namespace fs = std::filesystem;

namespace kagent {

namespace {

struct analysis_state {
  analyze_parent req;
  parent_analysis out;
  nlohmann::json profile = nullptr;  ///< {"metrics", "roofline", ...} or null
  std::string profile_platform;
  caf::response_promise rp;
};

} // namespace

caf::behavior parent_analysis_actor(caf::event_based_actor* self, context_ptr ctx, caf::actor worker, caf::actor llm) {
  install_exception_handler(self, "parent_analysis");
  auto st = std::make_shared<analysis_state>();

  auto write = [=](const std::string& name, const std::string& text) {
    fs::create_directories(st->req.work_dir);
    store::write_file_atomic(fs::path(st->req.work_dir) / name, text);
  };
  auto reply = [=](const nlohmann::json& bottlenecks, const std::string& source) {
    nlohmann::json j{{"profile", st->profile}, {"bottlenecks", bottlenecks}, {"source", source}};
    st->out.analysis_json = j.dump();
    write("analysis.json", j.dump(2));
    st->rp.deliver(st->out);
    self->quit();
  };
  // `lead`: directions already decided (the synthetic diagnosis), placed first; the LLM is asked
  // for the rest of the strategy's fan-out.
  auto ask_llm = [=](nlohmann::json lead) {
    bottleneck_prompt_input in;
    in.kernel_code = st->req.code;
    in.platform = st->profile_platform.empty() ? ctx->cfg.platform.profiler : st->profile_platform;
    in.gpu_name = ctx->gpu_name;
    if (st->profile.is_object()) {
      in.metrics = st->profile.value("metrics", nlohmann::json(nullptr));
      in.roofline = st->profile.value("roofline", nlohmann::json(nullptr));
    }
    in.num_bottlenecks = std::max(1, st->req.num_bottlenecks - static_cast<int>(lead.size()));
    const auto text = render_bottleneck_prompt(in, ctx->cfg.templates, ctx->install_root);
    write("bottleneck_prompt.txt", text);
    complete c;
    c.request_id = "analysis:" + st->req.parent_id;
    c.purpose = "bottleneck";
    c.model = st->req.model;
    c.messages = {{"user", text}};
    c.max_tokens = 16384;
    c.high_effort = ctx->cfg.high_reasoning_effort;
    c.candidate_id = st->req.parent_id;
    self->request(llm, caf::infinite, c)
        .then(
            [=](const completion& r) {
              st->out.llm_s += r.latency_s;
              const std::string base = lead.empty() ? "" : "synthetic";
              if (!r.ok) {
                write("bottleneck_error.txt", r.error_kind + ": " + r.error);
                return reply(lead, lead.empty() ? "none" : base);
              }
              write("bottleneck_response.txt", r.text);
              nlohmann::json arr = lead;
              for (auto& b : parse_bottleneck_reply(r.text)) {
                if (!ctx->cfg.bottleneck_override.empty()) b.category = ctx->cfg.bottleneck_override;
                arr.push_back(to_json(b));
              }
              if (lead.empty()) return reply(arr, arr.empty() ? "none" : "llm");
              reply(arr, arr.size() > lead.size() ? "synthetic+llm" : "synthetic");
            },
            [=](caf::error& err) {
              write("bottleneck_error.txt", to_string(err));
              reply(lead, lead.empty() ? "none" : "synthetic");
            });
  };

  // ROCm without a profile (SPEC §7.4): direction 1 is the synthetic diagnosis, built by the one
  // helper; when the strategy fans out wider, the LLM proposes the other directions from the code
  // alone, so that sibling candidates do not all repeat the same rewrite.
  auto synthetic = [=](const std::string& reason) {
    nlohmann::json lead = nlohmann::json::array();
    lead.push_back(to_json(synthetic_bottleneck(ctx->cfg.bottleneck_override, reason)));
    if (st->req.num_bottlenecks <= 1) return reply(lead, "synthetic");
    st->profile = nullptr;
    ask_llm(lead);
  };

  return {
      [=](const analyze_parent& a) -> caf::result<parent_analysis> {
        st->req = a;
        st->out.parent_id = a.parent_id;
        st->rp = self->make_response_promise<parent_analysis>();
        if (!a.known_profile_json.empty()) {
          // The parent was profiled when it was a candidate (its SOL profile): no second profile.
          auto j = nlohmann::json::parse(a.known_profile_json, nullptr, false);
          if (j.is_object()) {
            st->profile = j;
            st->profile_platform = j.value("platform", "");
            ask_llm(nlohmann::json::array());
            return st->rp;
          }
        }
        if (ctx->cfg.profile == "never") {
          // `profile: never`: the directions come from the code alone, as on a platform without a
          // profiler.
          ask_llm(nlohmann::json::array());
          return st->rp;
        }
        profile p;
        p.candidate_id = a.parent_id;
        p.code = a.code;
        p.label = "baseline";
        p.work_dir = a.work_dir;
        p.profile_id = "baseline_" + a.parent_id;
        self->request(worker, caf::infinite, p)
            .then(
                [=](const profile_result& pr) {
                  st->out.device_s += pr.wall_s;
                  st->profile_platform = pr.platform;
                  if (pr.available && pr.ok) {
                    st->profile = profile_to_json(pr);
                    return ask_llm(nlohmann::json::array());
                  }
                  if (pr.available) {
                    st->out.profile_failed = !pr.synthetic && !pr.abandoned;
                    write("profile_error.txt", pr.invocation + ": " + pr.error + "\n" + pr.output_tail);
                    // ROCm: a failed baseline profile means synthetic analysis (SPEC §7.4, §14 A.22),
                    // decided by the profiler component's platform, never by a class (A.25).
                    if (pr.platform == "rocm")
                      return synthetic(pr.synthetic ? pr.error : "rocprofv3 failed: " + pr.invocation + ": " + pr.error);
                  }
                  // No profiler on this platform (cpu, noop), or NVIDIA's profile failed: the LLM
                  // still proposes directions, from the code alone.
                  ask_llm(nlohmann::json::array());
                },
                [=](caf::error& err) {
                  write("profile_error.txt", to_string(err));
                  ask_llm(nlohmann::json::array());
                });
        return st->rp;
      },
  };
}

} // namespace kagent
