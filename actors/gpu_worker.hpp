#pragma once
// gpu_worker: the session of one device, a stateful actor. It owns the device actor (detached,
// linked: the one actor that runs the device's evaluations and profiles), spawns a candidate actor per
// candidate_spec and keeps its deadline (candidate_timeout_s: the candidate is killed and its device
// work cancelled), owns the device's analysis mode (profiled or synthetic: every profile of the device
// passes through it), and relays dedup queries and the manager's own device work.
#include <caf/all.hpp>

#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "actors/context.hpp"
#include "actors/llm_client.hpp"
#include "actors/device.hpp"
#include "messages/messages.hpp"

namespace kagent {

class gpu_worker_state {
public:
  static inline const char* name = "gpu_worker";

  caf::behavior start(caf::stateful_actor<gpu_worker_state>* self, context_ptr ctx, int device_id, llm_api llm,
                      caf::actor manager, device_actor_type remote);

private:
  caf::result<candidate_result> run_candidate(const candidate_spec& in);
  void on_deadline(const std::string& id);
  void on_candidate_down(const caf::down_msg& dm);
  void on_candidate_result(const candidate_result& r);
  bool interrupt();
  caf::result<profile_result> queue_profile(const profile& p);
  void next_profile();
  void send_batch(std::vector<std::pair<profile, caf::response_promise>> batch);
  /// A profile request to the device; an urgent one (urgent_profile) with CAF's high message priority,
  /// which the device's mailbox serves ahead of the candidates' queued evaluations.
  template <class Msg>
  auto send_to_device(bool urgent, Msg&& m) {
    return urgent ? self_->request<caf::message_priority::high>(device_, caf::infinite, std::forward<Msg>(m))
                  : self_->request(device_, caf::infinite, std::forward<Msg>(m));
  }
  void on_profiled(const profile& p, const profile_result& r);
  void go_synthetic(const std::string& reason);
  /// A result for a candidate that ended without one (timed out, or its actor died).
  candidate_result ended(const candidate_spec& spec, failure_kind cause, const std::string& error) const;

  caf::stateful_actor<gpu_worker_state>* self_ = nullptr;
  context_ptr ctx_;
  int device_id_ = 0;
  llm_api llm_;
  caf::actor manager_;
  device_actor_type device_;
  std::map<caf::actor_addr, std::pair<std::string, caf::response_promise>> running_;  ///< candidate -> (id, promise)
  std::map<std::string, caf::actor> handles_;  ///< candidate id -> its actor, while it runs
  std::map<std::string, candidate_spec> specs_;
  /// Every candidate this worker spawned: their exits (linked) are not the worker's end.
  std::set<caf::actor_addr> spawned_;
  /// Profiles wait here, one at the device at a time, so that a ROCm failure turns every later one
  /// synthetic before it reaches the profiler.
  std::deque<std::pair<profile, caf::response_promise>> profiles_;
  bool profiling_ = false;
  bool dispatch_pending_ = false;  ///< a dispatch_atom is on its way (queue_profile)
  bool synthetic_ = false;  ///< this device's analysis mode: synthetic for the rest of the run
  std::string synthetic_reason_;  ///< requested by the run, or the failure that switched it on
};

/// One per device. Answers candidate_spec with candidate_result.
caf::behavior gpu_worker_actor(caf::stateful_actor<gpu_worker_state>* self, context_ptr ctx, int worker_index,
                               int device_id, llm_api llm, caf::actor manager, device_actor_type remote);

} // namespace kagent
