// evaluator: device work through platform/device, serialised by the actor's mailbox and the device lock.
#include <optional>

#include "actors/actors.hpp"
#include "platform/common/stop.hpp"
#include "platform/device/device_backend.hpp"
#include "platform/gpu/specs.hpp"

namespace kagent {

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
  e.user_test_s = r.user_test_s;
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

} // namespace kagent
