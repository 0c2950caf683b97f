#pragma once
// Behaviours of every actor of a run (DESIGN.md "Actor topology"). Each is spawned by its parent
// with the shared run_context; handles are passed as spawn arguments, never inside messages.
#include <caf/all.hpp>

#include <mutex>

#include <nlohmann/json.hpp>

#include "actors/context.hpp"
#include "messages/messages.hpp"

namespace kagent {

// The manager (root supervisor of a run) is a stateful actor: actors/manager.hpp.

// The gpu worker of one device is a stateful actor: actors/gpu_worker.hpp.

/// Detached: owns the warm Python harness of one device (or the noop backend). evaluate -> evaluation.
caf::behavior evaluator_actor(caf::event_based_actor* self, context_ptr ctx, int device_id);

/// Detached: runs profiles on one device, one at a time, under one budget per profile.
/// profile -> profile_result. A failed profile also goes to `manager` as profiling_failed (supervision).
/// (mode_atom, "synthetic") stops all further profiler invocations on this device; so does the
/// profiler's own first failure when its platform is rocm (SPEC §7.4).
caf::behavior profiler_actor(caf::event_based_actor* self, context_ptr ctx, int device_id, caf::actor manager);

// The short-lived analysis of one parent is a stateful actor: actors/analysis.hpp.

// One in-flight candidate pipeline is a stateful actor: actors/candidate.hpp.

// The llm_client (admission, retries, accounting) is a stateful actor: actors/llm_client.hpp.

// The reporter (events.jsonl, progress line, summary, report.html) is a stateful actor: actors/reporter.hpp.

/// The lock of one device: the evaluator (verify, benchmark) and the profiler hold it for each request,
/// so that a profile never runs while the same GPU is timing a kernel (SPEC §14 B.91-B.92). Detached
/// actors block on it; a holder that dies releases it (a scoped lock, not a lease to expire).
std::mutex& device_mutex(int device_id);

/// Turns an exception escaping a handler into a down reason that names it.
void install_exception_handler(caf::scheduled_actor* self, const char* who);

} // namespace kagent
