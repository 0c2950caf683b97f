// The gpu worker's steps (actors/gpu_worker.hpp).
#include "actors/gpu_worker.hpp"

#include <fmt/format.h>

#include "actors/actors.hpp"
#include "actors/candidate.hpp"
#include "actors/device.hpp"
#include "actors/node_link.hpp"
#include "platform/common/stop.hpp"

namespace kagent {

namespace {
/// A candidate's deadline (candidate_timeout_s) expired: the worker ends it.
using deadline_atom = caf::atom_constant<caf::atom("deadline")>;
/// Sent to itself when a profile is queued: by the time it arrives, the profiles requested together
/// (a round's new parents) are all queued, and go to the device as one batch.
using dispatch_atom = caf::atom_constant<caf::atom("dispatch")>;
/// The most profiles one batch takes (one profiler process; each kernel adds its replay time).
constexpr size_t max_profile_batch = 4;
} // namespace

caf::behavior gpu_worker_actor(caf::stateful_actor<gpu_worker_state>* self, context_ptr ctx, int /*worker_index*/,
                               int device_id, llm_api llm, caf::actor manager, device_actor_type remote) {
  return self->state.start(self, std::move(ctx), device_id, std::move(llm), std::move(manager), std::move(remote));
}

caf::behavior gpu_worker_state::start(caf::stateful_actor<gpu_worker_state>* self, context_ptr ctx, int device_id,
                                      llm_api llm, caf::actor manager, device_actor_type remote) {
  install_exception_handler(self, "gpu_worker");
  self_ = self;
  ctx_ = std::move(ctx);
  device_id_ = device_id;
  llm_ = std::move(llm);
  manager_ = std::move(manager);
  // Detached: the device actor blocks on child processes and must not hold a scheduler thread. Linked:
  // if this worker dies it goes with it (and its children with it).
  if (remote)
    // A node's device: the relay ends (and this worker with it) when the node is lost.
    device_ = self->spawn<caf::linked>(remote_device_actor, remote, ctx_->run_path);
  else {
    device_ = self->spawn<caf::detached + caf::linked>(device_actor, ctx_, device_id);
    warm_device(self, device_);  // a node's devices are warmed by their node when the run opens there
  }
  self->set_down_handler([this](caf::down_msg& dm) { on_candidate_down(dm); });
  // Candidates are linked so that none outlives this worker (a node's device lost, a crash); their own
  // ends arrive as down messages above. Any other exit (the device's, the manager's shutdown) ends it.
  self->set_exit_handler([this](caf::exit_msg& em) {
    if (!spawned_.count(em.source)) self_->quit(std::move(em.reason));
  });
  return {
      [this](const candidate_spec& in) { return run_candidate(in); },
      [this](deadline_atom, const std::string& id) { on_deadline(id); },
      [this](dispatch_atom) {
        dispatch_pending_ = false;
        next_profile();
      },
      [this](interrupt_atom, int) { return interrupt(); },
      // The manager's own device work (the initial kernel and the references) queues behind the
      // candidates' on the same device actor, so one device never runs two timings at once.
      [this](const evaluate& e) { return self_->delegate(device_, e); },
      // Every profile of this device (candidates' SOL profiles, parents' baselines, final profiles).
      [this](const profile& p) { return queue_profile(p); },
      // From one of our candidates: only the manager knows every program of the run.
      [this](const dedup_query& q) { return self_->delegate(manager_, q); },
      [this](best_atom) { return self_->delegate(manager_, best_atom::value); },
      [this](mode_atom, analysis_mode mode) {
        // From the manager (a resumed run whose device was synthetic before): this device's session
        // switches mode for the rest of the run.
        if (mode == analysis_mode::synthetic) go_synthetic("requested by the run");
      },
      [this](const candidate_result& r) { on_candidate_result(r); },
      // From one of our candidates, measured and about to reflect: the manager records it now. Not
      // once its deadline has ended it (the manager has its timeout result then).
      [this](const candidate_measured& m) {
        if (handles_.count(m.result.candidate_id)) self_->send(manager_, m);
      },
  };
}

caf::result<candidate_result> gpu_worker_state::run_candidate(const candidate_spec& in) {
  if (fault_requested(*ctx_, "gpu_worker_throw", in.id))
    throw std::runtime_error("injected fault: gpu_worker_throw:" + in.id);
  auto spec = in;
  // A synthetic session runs no profiler, so a parent without an analysis gets the synthetic
  // diagnosis here, where the mode is known.
  if (synthetic_ && (!spec.baseline || spec.baseline->bottlenecks.empty())) {
    if (!spec.baseline) spec.baseline.emplace();
    spec.baseline->source = "synthetic";
    spec.baseline->bottlenecks = {synthetic_bottleneck(ctx_->cfg.bottleneck_override,
                                                       "this device's profiler failed earlier in the run")};
  }
  auto rp = self_->make_response_promise<candidate_result>();
  auto c = self_->spawn<caf::monitored + caf::linked>(candidate_actor, ctx_, spec, device_id_, caf::actor{self_}, device_, llm_);
  running_.emplace(c.address(), std::make_pair(spec.id, rp));
  spawned_.insert(c.address());
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
  self_->send(device_, cancel_atom::value, id);  // where the device is: a node cancels it there
  self_->send_exit(c, caf::exit_reason::kill);
  rp.deliver(ended(spec, failure_kind::timeout, fmt::format("candidate exceeded candidate_timeout_s={}", ctx_->cfg.candidate_timeout_s)));
}

void gpu_worker_state::on_candidate_down(const caf::down_msg& dm) {
  auto it = running_.find(dm.source);
  if (it == running_.end()) return;
  auto [id, rp] = it->second;
  running_.erase(it);
  handles_.erase(id);
  if (!dm.reason) return;  // a normal exit already delivered its result
  rp.deliver(ended(specs_[id], failure_kind::actor_down, "candidate actor failed: " + to_string(dm.reason)));
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

// ---- profiles and the analysis mode ------------------------------------------------------------------

caf::result<profile_result> gpu_worker_state::queue_profile(const profile& p) {
  // cpu, noop: nothing to profile with, which the device would only say after the evaluations queued
  // in its mailbox (on noop devices with 5 s replies, a new parent's analysis waited 21 s for that).
  if (!has_profiler(ctx_->cfg.platform.profiler)) return no_profiler_result(p, ctx_->cfg.platform.profiler);
  auto rp = self_->make_response_promise<profile_result>();
  // An urgent profile goes ahead of the ones queued here (and of the evaluations queued at the
  // device: send_to_device).
  if (urgent_profile(p)) {
    auto at = std::find_if(profiles_.begin(), profiles_.end(), [](const auto& q) { return !urgent_profile(q.first); });
    profiles_.emplace(at, p, rp);
  } else {
    profiles_.emplace_back(p, rp);
  }
  if (!dispatch_pending_) {
    dispatch_pending_ = true;
    self_->send(self_, dispatch_atom::value);
  }
  return rp;
}

// Synthetic mode (SPEC §7.4, §14 A.22-A.25): every later profile of this device answers ok=false,
// synthetic=true (its error says "synthetic mode: ...") and runs no tool.
void gpu_worker_state::next_profile() {
  while (!profiling_ && !profiles_.empty()) {
    auto [p, rp] = std::move(profiles_.front());
    profiles_.pop_front();
    if (synthetic_ && has_profiler(ctx_->cfg.platform.profiler)) {
      profile_result r;
      r.candidate_id = p.candidate_id;
      r.profile.label = p.label;
      r.profile.platform = ctx_->cfg.platform.profiler;
      r.available = true;
      r.synthetic = true;
      r.error = fmt::format("synthetic mode: profiling is off on GPU {} for the rest of the run ({})", device_id_,
                            synthetic_reason_);
      rp.deliver(r);
      continue;
    }
    // NVIDIA: the profiles queued behind this one share its profiler process (one interpreter, one
    // CUDA context, one set of inputs: the fixed cost is paid once).
    if (ctx_->cfg.platform.profiler == "nvidia" && !profiles_.empty()) {
      std::vector<std::pair<profile, caf::response_promise>> batch{{p, rp}};
      while (batch.size() < max_profile_batch && !profiles_.empty()) {
        batch.push_back(std::move(profiles_.front()));
        profiles_.pop_front();
      }
      return send_batch(std::move(batch));
    }
    profiling_ = true;
    send_to_device(urgent_profile(p), p)
        .then(
            [this, p, rp](const profile_result& r) mutable {
              profiling_ = false;
              on_profiled(p, r);
              rp.deliver(r);
              next_profile();
            },
            [this, rp](caf::error& err) mutable {
              profiling_ = false;
              rp.deliver(std::move(err));
              next_profile();
            });
  }
}

void gpu_worker_state::send_batch(std::vector<std::pair<profile, caf::response_promise>> batch) {
  profiling_ = true;
  profile_batch b;
  bool urgent = false;
  for (const auto& [p, rp] : batch) {
    b.items.push_back(p);
    urgent = urgent || urgent_profile(p);
  }
  auto shared = std::make_shared<std::vector<std::pair<profile, caf::response_promise>>>(std::move(batch));
  send_to_device(urgent, std::move(b))
      .then(
          [this, shared](std::vector<profile_result>& rs) {
            profiling_ = false;
            for (size_t i = 0; i < shared->size(); ++i) {
              auto& [p, rp] = (*shared)[i];
              if (i >= rs.size()) {
                rp.deliver(make_error(caf::sec::invalid_argument, "the device answered fewer profiles than asked"));
                continue;
              }
              on_profiled(p, rs[i]);
              rp.deliver(rs[i]);
            }
            next_profile();
          },
          [this, shared](caf::error& err) {
            profiling_ = false;
            for (auto& [p, rp] : *shared) rp.deliver(err);
            next_profile();
          });
}

// A failed profile goes to the manager (supervision). A ROCm failure (baseline or any later one)
// makes the session synthetic, decided by the profiler component's platform string, never by a class
// (SPEC §14 A.25). NVIDIA stays as it is: an ncu failure skips that profile only. A profile abandoned
// because its candidate timed out is no failure of the profiler.
void gpu_worker_state::on_profiled(const profile& p, const profile_result& r) {
  if (!r.available || r.ok || r.abandoned || r.synthetic) return;
  const bool turns = r.profile.platform == "rocm" && !synthetic_;
  if (turns) go_synthetic("after '" + r.error + "' in the " + r.invocation);
  self_->send(manager_,
              profiling_failed{device_id_, p.candidate_id, r.profile.platform, r.invocation, r.error, r.output_tail, turns});
}

void gpu_worker_state::go_synthetic(const std::string& reason) {
  if (synthetic_) return;
  synthetic_ = true;
  synthetic_reason_ = reason;
}

candidate_result gpu_worker_state::ended(const candidate_spec& spec, failure_kind cause,
                                         const std::string& error) const {
  return ended_without_result(spec, device_id_, cause, error);
}

} // namespace kagent
