#pragma once
// device: the one actor that touches a device. It owns the device's warm evaluator (verify,
// benchmark, the references, test.py) and runs its profiles, one request at a time: its mailbox is the
// device's exclusivity, so a profile never runs while the same GPU is timing a kernel and no two
// timings overlap (SPEC §14 B.91-B.92). Detached: every request blocks on child processes and must not
// hold a scheduler thread. Spawned and linked by the device's gpu_worker, which owns the device's
// analysis mode (a synthetic session's profiles never reach this actor).
#include <caf/all.hpp>

#include <map>
#include <memory>
#include <optional>
#include <vector>
#include <string>

#include "actors/context.hpp"
#include "messages/messages.hpp"
#include "platform/device/device_backend.hpp"
#include "platform/profiling/profile_runner.hpp"

namespace kagent {

// device_actor_type (its fixed protocol) is in messages/: a node's device crosses a link.

class device_state {
public:
  static inline const char* name = "device";

  device_state();
  ~device_state();

  device_actor_type::behavior_type start(device_actor_type::stateful_pointer<device_state> self, context_ptr ctx,
                                         int device_id);

private:
  evaluation run_evaluation(const evaluate& req);
  /// A profile whose program has exited while its ncu still writes the report (start_profile_kernels'
  /// tail) gives the device back at once: the reply is delegated to a helper actor that waits for
  /// the report (profile_tail_actor, in device.cpp), and this mailbox goes on with the next request.
  caf::result<profile_result> run_profile(const profile& p);
  caf::result<std::vector<profile_result>> run_profile_batch(const profile_batch& b);
  /// The reply for `p`: no outcome when this platform has no profiler; `abandoned` when its candidate
  /// was cancelled (or the run is stopping), which is no failure of the profiler.
  profile_result result_of(const profile& p, std::optional<kernel_profile_outcome> outcome,
                           bool abandoned = false) const;

  device_actor_type::stateful_pointer<device_state> self_ = nullptr;
  context_ptr ctx_;
  int device_id_ = 0;
  std::unique_ptr<device_backend> backend_;  ///< started with the first evaluation
  /// The next profile's ncu process, started ahead (NVIDIA; profiler_standby): at the actor's start
  /// and again after each profile, so that a profile finds one ready.
  profiler_standby standby_;
  void arm_standby();
  int unnamed_ = 0;                           ///< profiles that came without a profile_id
  /// The timing of each program this device benchmarked, by program hash. A verified candidate that is
  /// the same program (a duplicate: the manager says so from the same hash) gets that timing instead of
  /// a benchmark of its own: on the cpu platform 5 of a matvec run's 8 benchmarks were duplicates, 18 of
  /// its 51 s.
  std::map<std::string, device_result> timed_;
  void remember_timing(const device_result& r);
};

/// evaluate -> evaluation; profile -> profile_result (available=false on a platform without a
/// profiler: cpu, noop). A profile killed because its candidate timed out answers abandoned=true.
device_actor_type::behavior_type device_actor(device_actor_type::stateful_pointer<device_state> self, context_ptr ctx,
                                              int device_id);

/// Asks `device` to start its evaluator and load problem.py now (device_mode::warm) rather than at its
/// first candidate: sent when a device joins a run, so that every device of a multi-device run is ready
/// when the first candidates arrive (each start costs seconds: Python, torch, CUDA, the inputs). The
/// reply carries nothing; a failure is reported by the device's first real request.
template <class Self>
void warm_device(Self* self, const device_actor_type& device) {
  self->request(device, caf::infinite, evaluate{"", "", device_mode::warm, ""})
      .then([](const evaluation&) {}, [](caf::error&) {});
}

/// rocm and nvidia have a profiler; cpu, noop and "" do not.
bool has_profiler(const std::string& platform);

/// The answer to `p` on a platform without a profiler (`platform`): available=false, nothing measured.
profile_result no_profiler_result(const profile& p, const std::string& platform);

/// A parent's baseline profile: the next generation's candidates wait for its analysis, so it goes
/// ahead of queued candidate work (the worker's profile queue, the device's mailbox).
inline bool urgent_profile(const profile& p) { return p.label == "baseline"; }

} // namespace kagent
