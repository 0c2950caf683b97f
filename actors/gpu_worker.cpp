// The gpu worker's steps (actors/gpu_worker.hpp).
#include "actors/gpu_worker.hpp"

#include <fmt/format.h>

#include "actors/actors.hpp"
#include "actors/candidate.hpp"
#include "platform/common/stop.hpp"

namespace kagent {

namespace {
/// A candidate's deadline (candidate_timeout_s) expired: the worker ends it.
using deadline_atom = caf::atom_constant<caf::atom("deadline")>;
} // namespace

caf::behavior gpu_worker_actor(caf::stateful_actor<gpu_worker_state>* self, context_ptr ctx, int /*worker_index*/,
                               int device_id, caf::actor llm, caf::actor manager) {
  return self->state.start(self, std::move(ctx), device_id, std::move(llm), std::move(manager));
}

caf::behavior gpu_worker_state::start(caf::stateful_actor<gpu_worker_state>* self, context_ptr ctx, int device_id,
                                      caf::actor llm, caf::actor manager) {
  install_exception_handler(self, "gpu_worker");
  self_ = self;
  ctx_ = std::move(ctx);
  device_id_ = device_id;
  llm_ = std::move(llm);
  manager_ = std::move(manager);
  // Detached: the evaluator and the profiler block on child processes and must not hold a scheduler
  // thread. Linked: if this worker dies they go with it (and their children with them).
  evaluator_ = self->spawn<caf::detached + caf::linked>(evaluator_actor, ctx_, device_id);
  profiler_ = self->spawn<caf::detached + caf::linked>(profiler_actor, ctx_, device_id, manager_);
  self->set_down_handler([this](caf::down_msg& dm) { on_candidate_down(dm); });
  return {
      [this](const candidate_spec& in) { return run_candidate(in); },
      [this](deadline_atom, const std::string& id) { on_deadline(id); },
      [this](interrupt_atom, int) { return interrupt(); },
      // The manager's own device work (the initial kernel and the references) queues behind the
      // candidates' on the same evaluator, so one device never runs two timings at once.
      [this](const evaluate& e) { return self_->delegate(evaluator_, e); },
      // Baseline profiles for the manager's cache run on this device's profiler, in its queue.
      [this](const profile& p) { return self_->delegate(profiler_, p); },
      // From one of our candidates: only the manager knows every program of the run.
      [this](const dedup_query& q) { return self_->delegate(manager_, q); },
      [this](best_atom) { return self_->delegate(manager_, best_atom::value); },
      [this](mode_atom, const std::string& mode) {
        // From the manager (supervision): this device's session switches mode for the rest of the run.
        if (mode == "synthetic") synthetic_ = true;
        self_->send(profiler_, mode_atom::value, mode);
      },
      [this](const candidate_result& r) { on_candidate_result(r); },
  };
}

caf::result<candidate_result> gpu_worker_state::run_candidate(const candidate_spec& in) {
  if (fault_requested(*ctx_, "gpu_worker_throw", in.id))
    throw std::runtime_error("injected fault: gpu_worker_throw:" + in.id);
  auto spec = in;
  spec.synthetic = spec.synthetic || synthetic_;
  auto rp = self_->make_response_promise<candidate_result>();
  auto c = self_->spawn<caf::monitored>(candidate_actor, ctx_, spec, device_id_, caf::actor{self_}, evaluator_,
                                        profiler_, llm_);
  running_.emplace(c.address(), std::make_pair(spec.id, rp));
  specs_[spec.id] = spec;
  handles_[spec.id] = c;
  self_->send(c, start_atom::value);
  // The deadline is kept here, where the candidate lives: when it expires the candidate is killed, so
  // it starts no further LLM call, device step or file write, and what it has in flight (an LLM call,
  // a device step, a profile) is cancelled.
  self_->delayed_send(self_, std::chrono::milliseconds(static_cast<long long>(ctx_->cfg.candidate_timeout_s * 1000)),
                      deadline_atom::value, spec.id);
  return rp;
}

void gpu_worker_state::on_deadline(const std::string& id) {
  auto h = handles_.find(id);
  if (h == handles_.end()) return;  // it ended in time
  auto c = h->second;
  handles_.erase(h);
  auto it = running_.find(c.address());
  if (it == running_.end()) return;
  auto rp = it->second.second;
  running_.erase(it);
  const auto spec = specs_[id];
  specs_.erase(id);
  // Its LLM calls, device work and profiles are given up (their waits watch cancel_work), so the
  // device is free for the next candidate at once.
  cancel_work(id);
  self_->send_exit(c, caf::exit_reason::kill);
  rp.deliver(ended(spec, "timeout", fmt::format("candidate exceeded candidate_timeout_s={}", ctx_->cfg.candidate_timeout_s)));
}

void gpu_worker_state::on_candidate_down(const caf::down_msg& dm) {
  auto it = running_.find(dm.source);
  if (it == running_.end()) return;
  auto [id, rp] = it->second;
  running_.erase(it);
  handles_.erase(id);
  if (!dm.reason) return;  // a normal exit already delivered its result
  rp.deliver(ended(specs_[id], "actor_down", "candidate actor failed: " + to_string(dm.reason)));
  specs_.erase(id);
}

// From one of our candidates: fulfil the manager's request.
void gpu_worker_state::on_candidate_result(const candidate_result& r) {
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    if (it->second.first != r.candidate_id) continue;
    auto rp = it->second.second;
    running_.erase(it);
    specs_.erase(r.candidate_id);
    handles_.erase(r.candidate_id);
    rp.deliver(r);
    return;
  }
}

// The run is stopping: every candidate of this device ends now, with no result (the manager leaves
// them pending for --resume). Their child processes are killed by the runtime next.
bool gpu_worker_state::interrupt() {
  for (auto& [id, c] : handles_) self_->send_exit(c, caf::exit_reason::kill);
  handles_.clear();
  running_.clear();
  specs_.clear();
  return true;
}

candidate_result gpu_worker_state::ended(const candidate_spec& spec, const std::string& cause,
                                         const std::string& error) const {
  candidate_result r;
  r.candidate_id = spec.id;
  r.parent_id = spec.parent_id;
  r.round = spec.round;
  r.gpu_id = device_id_;
  r.model = spec.model;
  r.failure_cause = cause;
  r.error = error;
  return r;
}

} // namespace kagent
