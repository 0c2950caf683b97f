// profiler: runs the vendor's profile plan for one kernel on this actor's device (platform/profiling).
// Detached (each profile blocks on child processes), one profile at a time: the mailbox serialises them.
//
// The platform is the profiler component's (ctx->cfg.platform.profiler), so a cpu run may profile with
// rocm. Platforms without a profiler (cpu, noop, "") answer available=false. A failed profile replies
// ok=false and also tells the manager (profiling_failed). Synthetic mode (SPEC §7.4, §14 A.22-A.25):
// after (mode_atom, "synthetic"), or after the first failure when the platform string is "rocm", every
// later profile answers ok=false, synthetic=true (its error says "synthetic mode: ...") and runs no
// tool. NVIDIA never enters it by itself: an ncu failure skips that profile only. A profile killed
// because its candidate timed out answers abandoned=true: no failure of the profiler.
#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include <mutex>

#include "actors/actors.hpp"
#include "platform/common/stop.hpp"
#include "platform/gpu/pinning.hpp"
#include "platform/profiling/profile_runner.hpp"
#include "platform/rocm/rocprof_plan.hpp"

namespace fs = std::filesystem;

namespace kagent {

namespace {

struct profiler_state {
  bool synthetic = false;
  std::string synthetic_reason;  ///< why: requested, or the failure that switched it on
  int unnamed = 0;               ///< profiles that came without a profile_id
};

bool has_profiler(const std::string& platform) { return platform == "rocm" || platform == "nvidia"; }

kernel_profile_request make_request(const run_context& ctx, int device_id, const profile& p, profiler_state& st) {
  kernel_profile_request req;
  req.platform = ctx.cfg.platform.profiler;
  req.code = p.code;
  std::string id = p.profile_id;
  if (id.empty()) id = fmt::format("{}_{}_{}", p.candidate_id.empty() ? "kernel" : p.candidate_id,
                                   p.label.empty() ? "profile" : p.label, st.unnamed++);
  req.kernel_id = sanitize_kernel_id(id);
  const std::string base = !p.work_dir.empty() ? p.work_dir
                           : !ctx.run_path.empty() ? (fs::path(ctx.run_path) / "profiles").string()
                                                   : fs::current_path().string();
  req.dir = (fs::path(base) / ("profile_" + req.kernel_id)).string();
  req.python = !ctx.python.empty() ? ctx.python : ctx.cfg.python;
  req.install_root = ctx.install_root;
  req.problem_path = ctx.problem_path;
  req.env = ctx.vendor.empty() ? ctx.child_env : pin_environment(ctx.child_env, ctx.vendor, device_id);
  req.kwargs = ctx.cfg.pkwargs;
  req.budget_s = p.budget_s > 0                    ? p.budget_s
                 : ctx.cfg.profile_budget_s > 0 ? ctx.cfg.profile_budget_s
                                                  : default_profile_budget_s(ctx.cfg.candidate_timeout_s);
  req.gpu_name = !ctx.gpu_name.empty() ? ctx.gpu_name : ctx.cfg.gpu_name;
  req.roofline = ctx.cfg.roofline;
  req.kernel_name = p.kernel_name;
  // A GPU-less run (a cpu run that profiles with a fake or remote tool) runs the kernel in the Triton
  // interpreter with the small problem, as its evaluator does.
  req.device = ctx.vendor.empty() ? "cpu" : "cuda";
  // The profiled kernel is candidate code: the tools run in the run's sandbox.
  req.sandbox_mode = ctx.sandbox_mode.empty() ? ctx.cfg.sandbox.mode : ctx.sandbox_mode;
  req.rlimits = limits_from_config(ctx.cfg.sandbox, ctx.vendor, std::max(600.0, 2 * ctx.cfg.candidate_timeout_s));
  return req;
}

} // namespace


caf::behavior profiler_actor(caf::event_based_actor* self, context_ptr ctx, int device_id, caf::actor manager) {
  install_exception_handler(self, "profiler");
  auto st = std::make_shared<profiler_state>();
  return {
      [=](const profile& p) -> profile_result {
        profile_result r;
        r.candidate_id = p.candidate_id;
        r.label = p.label;
        r.platform = ctx->cfg.platform.profiler;
        if (!has_profiler(r.platform)) {
          r.available = false;  // cpu, noop: nothing to profile with
          return r;
        }
        r.available = true;
        if (st->synthetic) {
          r.ok = false;
          r.synthetic = true;
          r.error = fmt::format("synthetic mode: profiling is off on GPU {} for the rest of the run ({})", device_id,
                                st->synthetic_reason);
          return r;
        }
        kernel_profile_outcome o;
        // A candidate whose deadline passed (cancel_work) has its profiler killed and none started.
        work_scope scope(p.candidate_id);
        try {
          // One device, one measurement at a time: a profile never overlaps a benchmark or a
          // verification on the same GPU (SPEC §14 B.92).
          std::lock_guard<std::mutex> device(device_mutex(device_id));
          if (should_give_up()) throw std::runtime_error("cancelled before it started");
          o = profile_kernel(make_request(*ctx, device_id, p, *st));
        } catch (const std::exception& e) {
          // profile_kernel reports tool failures itself; this is a bad request (e.g. a negative device id).
          o.ok = false;
          o.error = std::string("profiler: ") + e.what();
          o.invocation = "setup";
        }
        r.ok = o.ok;
        r.wall_s = o.wall_s;
        if (o.ok) {
          r.profile = {o.kernel_name, r.platform, p.label, std::move(o.metrics), std::move(o.roofline)};
          return r;
        }
        r.error = o.error;
        r.invocation = o.invocation;
        r.output_tail = o.output_tail;
        if (should_give_up()) {
          // Killed because its candidate timed out (or the run is stopping): not the profiler's
          // failure, so the device keeps profiling.
          r.abandoned = true;
          r.error = "profile abandoned: " + std::string(stop_requested() ? "the run is stopping" : "its candidate timed out");
          return r;
        }
        self->send(manager, profiling_failed{device_id, p.candidate_id, r.platform, o.invocation, o.error,
                                             o.output_tail});
        // SPEC §7.4: a ROCm profiler failure (baseline or any later one) makes the session synthetic;
        // decided by the component's platform string, never by a class (A.25). NVIDIA stays as it is.
        if (r.platform == "rocm") {
          st->synthetic = true;
          st->synthetic_reason = "after '" + o.error + "' in the " + o.invocation;
        }
        return r;
      },
      [=](mode_atom, const std::string& mode) {
        if (mode == "synthetic" && !st->synthetic) {
          st->synthetic = true;
          st->synthetic_reason = "requested by the run";
        }
      },
  };
}

} // namespace kagent
