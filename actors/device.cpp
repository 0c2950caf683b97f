// The device actor (actors/device.hpp): the evaluator's and the profiler's requests of one device, in
// one mailbox.
//
// The profiler's platform is the profiler component's (ctx->cfg.platform.profiler), so a cpu run may
// profile with rocm. A failed profile replies ok=false with the failing invocation and its output; the
// gpu_worker reports it to the manager and decides the device's mode (SPEC §7.4).
#include "actors/device.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include "actors/actors.hpp"
#include "platform/common/stop.hpp"
#include "platform/device/device_backend.hpp"
#include "platform/gpu/pinning.hpp"
#include "platform/gpu/specs.hpp"
#include "platform/profiling/profile_runner.hpp"
#include "platform/rocm/rocprof_plan.hpp"

namespace fs = std::filesystem;

namespace kagent {

/// The reply to `p` from its outcome (none: this platform has no profiler); abandoned when its
/// candidate was cancelled or the run is stopping.
profile_result profile_reply(const profile& p, const std::string& platform, std::optional<kernel_profile_outcome> outcome,
                             bool abandoned = false);

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
  s.recorded_best_ms = ctx.recorded_best_ms;
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
  s.compile_reference = ctx.cfg.compile_reference;
  s.test_path = ctx.test_path;
  // Absolute: the judge runs in another working directory than ours.
  if (!ctx.cache_root.empty()) {
    std::error_code ec;
    const auto root = std::filesystem::absolute(ctx.cache_root, ec);
    s.reference_cache_dir = ((ec ? std::filesystem::path(ctx.cache_root) : root) / "references").string();
  }
  s.sandbox_prefix = ctx.sandbox_prefix;
  s.sandbox_mode = ctx.sandbox_mode;
  if (auto spec = find_gpu_specs(ctx.gpu_name)) s.peak_bandwidth_gbps = spec->peak_memory_bw_gbps;
  return s;
}

evaluation to_message(const device_result& r) {
  evaluation e;
  e.candidate_id = r.candidate_id;
  e.verified = r.verified;
  e.benchmarked = r.benchmarked;
  e.time_ms = r.time_ms;
  e.time_spread_pct = r.time_spread_pct;
  e.eager_ms = r.eager_ms;
  e.compile_ms = r.compile_ms;
  e.error = r.error;
  e.failure_cause = r.failure_cause;
  e.code_hash = r.code_hash;
  e.floor_pct = r.floor_pct;
  e.stdout_tail = r.stdout_tail;
  e.stderr_tail = r.stderr_tail;
  e.wall_s = r.wall_s;
  e.user_test_s = r.user_test_s;
  e.references_cached_at = r.references_cached_at;
  return e;
}

kernel_profile_request make_request(const run_context& ctx, int device_id, const profile& p, int& unnamed) {
  kernel_profile_request req;
  req.platform = ctx.cfg.platform.profiler;
  req.code = p.code;
  std::string id = p.profile_id;
  if (id.empty()) id = fmt::format("{}_{}_{}", p.candidate_id.empty() ? "kernel" : p.candidate_id,
                                   p.label.empty() ? "profile" : p.label, unnamed++);
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
  req.cache_root = ctx.cache_root;
  // The launchers the device's judge built, read-only in the profiler's sandbox (bwrap on NVIDIA).
  if (!ctx.run_path.empty() && launchers_shareable(ctx.vendor, req.sandbox_mode, ctx.child_env))
    req.shared_launchers = shared_launcher_dir(ctx.run_path, device_id);
  return req;
}

} // namespace

bool has_profiler(const std::string& platform) { return platform == "rocm" || platform == "nvidia"; }

profile_result no_profiler_result(const profile& p, const std::string& platform) {
  profile_result r;
  r.candidate_id = p.candidate_id;
  r.profile.label = p.label;
  r.profile.platform = platform;
  return r;
}

// ---- the rest of a profile whose device work is over ---------------------------------------------------

namespace {

/// (tail_atom) -> the batch's replies; (tail_one_atom) -> the one profile's. Sent once, by the device
/// actor's delegation of the request whose profile it finishes.
using tail_atom = caf::atom_constant<caf::atom("tail")>;
using tail_one_atom = caf::atom_constant<caf::atom("tailone")>;
using profile_tail_actor = caf::typed_actor<caf::replies_to<tail_atom>::with<std::vector<profile_result>>,
                                            caf::replies_to<tail_one_atom>::with<profile_result>>;

/// What the helper needs: the tail, the profiles it answers (replies already made for those that did
/// not reach the profiler), and the device, which profiles again a kernel the batch did not deliver.
struct tail_job {
  std::unique_ptr<profile_tail> tail;
  std::string platform;
  std::vector<profile> items;
  std::vector<kernel_profile_request> reqs;  ///< of the items that reached the profiler
  std::vector<size_t> index;                 ///< reqs[k] is items[index[k]]
  std::vector<profile_result> out;           ///< one per item
  device_actor_type device;
};

struct tail_state {
  static inline const char* name = "profile_tail";
};

/// Waits for ncu's report (blocking: a detached actor), then calls `deliver` with one reply per item.
/// A kernel the batch did not deliver goes back to the device, whose mailbox keeps the device's
/// exclusivity, and is answered with that profile (its file gets the batch's record first, as after
/// any batch); if the device is gone, the batch's failure stands.
template <class Self, class Deliver>
void finish_tail(Self* self, const std::shared_ptr<tail_job>& job, Deliver deliver) {
  auto outcomes = job->tail->finish();
  job->tail.reset();
  profile_batch again;
  std::vector<size_t> redo;                    // positions in reqs
  std::vector<std::optional<invocation_record>> batch_record;  // of each redo, the batch's (if it ran)
  for (size_t k = 0; k < job->index.size() && k < outcomes.size(); ++k) {
    const auto& item = job->items[job->index[k]];
    if (outcomes[k].redo && !stop_requested() && !work_cancelled(item.candidate_id)) {
      again.items.push_back(item);
      redo.push_back(k);
      batch_record.push_back(outcomes[k].records.empty() ? std::nullopt
                                                         : std::optional<invocation_record>(outcomes[k].records.front()));
    }
    job->out[job->index[k]] = profile_reply(item, job->platform, std::move(outcomes[k]));
  }
  if (again.items.empty()) {
    deliver(std::move(job->out));
    self->quit();
    return;
  }
  self->request(job->device, caf::infinite, std::move(again))
      .then(
          [self, job, redo, batch_record, deliver](std::vector<profile_result>& rs) mutable {
            for (size_t j = 0; j < redo.size() && j < rs.size(); ++j) {
              const auto k = redo[j];
              const auto why = job->out[job->index[k]].error;
              try {
                if (batch_record[j])
                  prepend_invocation_record(job->reqs[k].dir, *batch_record[j],
                                            "rejected: " + why + "; profiled again on its own, on the device");
              } catch (const std::exception&) {
              }
              job->out[job->index[k]] = std::move(rs[j]);
            }
            deliver(std::move(job->out));
            self->quit();
          },
          [self, job, deliver](caf::error&) mutable {
            deliver(std::move(job->out));
            self->quit();
          });
}

profile_tail_actor::behavior_type profile_tail_helper(profile_tail_actor::stateful_pointer<tail_state> self,
                                                      std::shared_ptr<tail_job> job) {
  return {
      [self, job](tail_atom) -> caf::result<std::vector<profile_result>> {
        auto rp = self->make_response_promise<std::vector<profile_result>>();
        finish_tail(self, job, [rp](std::vector<profile_result> out) mutable { rp.deliver(std::move(out)); });
        return rp;
      },
      [self, job](tail_one_atom) -> caf::result<profile_result> {
        auto rp = self->make_response_promise<profile_result>();
        finish_tail(self, job, [rp](std::vector<profile_result> out) mutable {
          rp.deliver(out.empty() ? profile_result{} : std::move(out.front()));
        });
        return rp;
      },
  };
}

} // namespace

device_state::device_state() = default;
device_state::~device_state() = default;

device_actor_type::behavior_type device_actor(device_actor_type::stateful_pointer<device_state> self, context_ptr ctx,
                                              int device_id) {
  return self->state.start(self, std::move(ctx), device_id);
}

device_actor_type::behavior_type device_state::start(device_actor_type::stateful_pointer<device_state> self,
                                                     context_ptr ctx, int device_id) {
  install_exception_handler(self, "device");
  self_ = self;
  ctx_ = std::move(ctx);
  device_id_ = device_id;
  arm_standby();
  return {
      [this](const evaluate& req) { return run_evaluation(req); },
      [this](const profile& p) { return run_profile(p); },
      [this](const profile_batch& b) { return run_profile_batch(b); },
      // Too late to matter here (this actor was busy with the work being cancelled; the gpu worker, or
      // a node's relay, cancelled it already): kept so that one protocol serves local and remote.
      [](cancel_atom, const std::string& id) { cancel_work(id); },
  };
}

// The backend reports child failures in the evaluation; anything thrown here is our own fault (a
// broken run directory, say) and must fail this request, not the device session. A candidate whose
// deadline passed (cancel_work) has its device work killed at once, and work of it still queued here is
// not started: the device goes to the next candidate.
evaluation device_state::run_evaluation(const evaluate& req) {
  std::optional<work_scope> scope;
  const bool start = req.mode == device_mode::initial || req.mode == device_mode::start_checks;
  if (!start && !req.candidate_id.empty()) scope.emplace(req.candidate_id);
  try {
    if (scope && should_give_up()) {
      evaluation e;
      e.candidate_id = req.candidate_id;
      e.failure_cause = failure_kind::timeout;
      e.error = "cancelled before it reached the device";
      return e;
    }
    if (!backend_) backend_ = make_device_backend(settings_for(*ctx_, device_id_));
    if (req.mode == device_mode::warm) {
      backend_->prepare();
      evaluation e;
      e.candidate_id = req.candidate_id;
      return e;
    }
    if (req.mode == device_mode::verify_benchmark) {
      // Both here, back to back: when a candidate sent its benchmark only after its verify came back,
      // other candidates' queued verifies ran between them and the judge, which keeps one verified
      // candidate process, verified it again (H100, 2026-12-06: 0.85 s of a benchmark step's 1.1 s).
      device_request v{req.candidate_id, req.code, device_mode::verify, req.work_dir};
      v.hash_after_verify = true;
      auto ver = backend_->run(v);
      if (!ver.verified || should_give_up()) return to_message(ver);
      if (auto it = timed_.find(ver.code_hash); ver.hashed_after_verify && it != timed_.end()) {
        // The same program was timed here before: its timing is this one's. The manager records the
        // candidate as a duplicate of it (same hash), which never becomes the best; test.py is not run
        // again either (tested_programs).
        device_result same = it->second;
        same.candidate_id = req.candidate_id;
        same.verified = true;
        same.user_tested = false;
        same.user_test_s = 0;
        same.wall_s = ver.wall_s;
        same.stdout_tail = ver.stdout_tail;
        same.stderr_tail = ver.stderr_tail;
        return to_message(same);
      }
      device_request b{req.candidate_id, req.code, device_mode::benchmark, req.work_dir};
      b.best_ms = req.best_ms;
      if (ver.hashed_after_verify) b.known_hash = ver.code_hash;  // hashed once, not again after the timing
      auto ben = backend_->run(b);
      ben.verified = true;
      ben.wall_s += ver.wall_s;
      remember_timing(ben);
      return to_message(ben);
    }
    device_request dr{req.candidate_id, req.code, req.mode, req.work_dir};
    dr.best_ms = req.best_ms;
    if (req.mode == device_mode::initial) {
      // The starting kernel's steps go to the manager (the sender: delegation keeps it), whose
      // progress line shows them during the long initial phase.
      auto to = caf::actor_cast<caf::actor>(self_->current_sender());
      if (to) dr.on_step = [to](const std::string& what) { caf::anon_send(to, step_atom::value, what); };
    }
    auto r = backend_->run(dr);
    if (req.mode == device_mode::initial) remember_timing(r);
    return to_message(r);
  } catch (const std::exception& ex) {
    evaluation e;
    e.candidate_id = req.candidate_id;
    e.failure_cause = failure_kind::harness;
    e.error = std::string{"evaluator: "} + ex.what();
    return e;
  }
}

void device_state::remember_timing(const device_result& r) {
  if (r.benchmarked && !r.code_hash.empty() && is_measured(r.time_ms)) timed_.emplace(r.code_hash, r);
}

caf::result<profile_result> device_state::run_profile(const profile& p) {
  // A candidate whose deadline passed (cancel_work) has its profiler killed and none started.
  work_scope scope(p.candidate_id);
  if (!has_profiler(ctx_->cfg.platform.profiler)) return result_of(p, std::nullopt);
  kernel_profile_outcome o;
  std::unique_ptr<profile_tail> tail;
  kernel_profile_request req;
  try {
    if (should_give_up()) throw std::runtime_error("cancelled before it started");
    req = make_request(*ctx_, device_id_, p, unnamed_);
    // The next standby starts beside this profile, except after the final one (no profile follows).
    auto started = start_profile_kernels({req}, &standby_, p.label != "final");
    if (started.tail) tail = std::move(started.tail);
    else o = std::move(started.outcomes.front());
  } catch (const std::exception& e) {
    // profile_kernel reports tool failures itself; this is a bad request (e.g. a negative device id).
    o.ok = false;
    o.error = std::string("profiler: ") + e.what();
    o.invocation = "setup";
  }
  if (p.label != "final") arm_standby();  // after the final profile none follows
  if (tail) {
    auto job = std::make_shared<tail_job>();
    job->tail = std::move(tail);
    job->platform = ctx_->cfg.platform.profiler;
    job->items = {p};
    job->reqs = {req};
    job->index = {0};
    job->out.resize(1);
    job->device = caf::actor_cast<device_actor_type>(self_);
    auto helper = self_->spawn<caf::detached>(profile_tail_helper, job);
    return self_->delegate(helper, tail_one_atom::value);
  }
  return result_of(p, std::move(o));
}

// A profile that finds its ncu started (torch, Triton, the problem and the CUDA context loaded while
// the device did other work) costs the device about 3 s instead of 9-14 s (benchmarks/RESULTS.md).
// Not with profile: never (no profile but the final one comes), nor on ROCm.
void device_state::arm_standby() {
  if (ctx_->cfg.platform.profiler != "nvidia" || ctx_->cfg.profile == "never" || stop_requested()) return;
  try {
    profile p;
    p.label = "standby";
    p.profile_id = fmt::format("standby_d{}", device_id_);
    standby_.start(make_request(*ctx_, device_id_, p, unnamed_));
  } catch (const std::exception&) {
    // A request that cannot be made fails the profile that needs it, with its reason.
  }
}

// The queued profiles of this device in one profiler process where the tool allows it (NVIDIA:
// profile_kernels); a kernel the batch did not deliver is profiled on its own there. Profiles of
// candidates cancelled before the batch starts are not run. A cancel during the batch does not stop
// it (the batch serves other kernels too); its budget bounds it.
caf::result<std::vector<profile_result>> device_state::run_profile_batch(const profile_batch& b) {
  std::vector<profile_result> out(b.items.size());
  if (!has_profiler(ctx_->cfg.platform.profiler)) {
    for (size_t i = 0; i < b.items.size(); ++i) out[i] = result_of(b.items[i], std::nullopt);
    return out;
  }
  std::vector<kernel_profile_request> reqs;
  std::vector<size_t> index;
  for (size_t i = 0; i < b.items.size(); ++i) {
    const auto& p = b.items[i];
    kernel_profile_outcome o;
    if (work_cancelled(p.candidate_id) || stop_requested()) {
      o.error = "cancelled before it started";
      o.invocation = "setup";
      out[i] = result_of(p, std::move(o), true);
      continue;
    }
    try {
      reqs.push_back(make_request(*ctx_, device_id_, p, unnamed_));
      index.push_back(i);
    } catch (const std::exception& e) {
      o.error = std::string("profiler: ") + e.what();
      o.invocation = "setup";
      out[i] = result_of(p, std::move(o));
    }
  }
  const bool more = std::any_of(b.items.begin(), b.items.end(), [](const profile& p) { return p.label != "final"; });
  auto started = start_profile_kernels(reqs, &standby_, more);
  if (more) arm_standby();  // as after a single profile: none after a final one
  if (started.tail) {
    auto job = std::make_shared<tail_job>();
    job->tail = std::move(started.tail);
    job->platform = ctx_->cfg.platform.profiler;
    job->items = b.items;
    job->reqs = std::move(reqs);
    job->index = std::move(index);
    job->out = std::move(out);
    job->device = caf::actor_cast<device_actor_type>(self_);
    auto helper = self_->spawn<caf::detached>(profile_tail_helper, job);
    return self_->delegate(helper, tail_atom::value);
  }
  auto& outcomes = started.outcomes;
  for (size_t k = 0; k < index.size() && k < outcomes.size(); ++k)
    out[index[k]] = result_of(b.items[index[k]], std::move(outcomes[k]));
  return out;
}

profile_result device_state::result_of(const profile& p, std::optional<kernel_profile_outcome> outcome,
                                       bool abandoned) const {
  return profile_reply(p, ctx_->cfg.platform.profiler, std::move(outcome), abandoned);
}

profile_result profile_reply(const profile& p, const std::string& platform, std::optional<kernel_profile_outcome> outcome,
                             bool abandoned) {
  profile_result r = no_profiler_result(p, platform);
  r.available = outcome.has_value();
  if (!outcome) return r;  // cpu, noop: nothing to profile with
  auto& o = *outcome;
  r.ok = o.ok;
  r.wall_s = o.wall_s;
  if (o.ok) {
    r.profile.kernel_name = o.kernel_name;
    r.profile.metrics = std::move(o.metrics);
    r.profile.roofline = std::move(o.roofline);
    return r;
  }
  r.error = o.error;
  r.invocation = o.invocation;
  r.output_tail = o.output_tail;
  if (abandoned || work_cancelled(p.candidate_id) || stop_requested()) {
    // Killed because its candidate timed out (or the run is stopping): not the profiler's failure,
    // so the device keeps profiling.
    r.abandoned = true;
    r.error = "profile abandoned: " + std::string(stop_requested() ? "the run is stopping" : "its candidate timed out");
  }
  return r;
}

} // namespace kagent
