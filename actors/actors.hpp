#pragma once
// Behaviours of every actor of a run (DESIGN.md "Actor topology"). Each is spawned by its parent
// with the shared run_context; handles are passed as spawn arguments, never inside messages.
#include <caf/all.hpp>

#include <mutex>

#include <nlohmann/json.hpp>

#include "actors/context.hpp"
#include "messages/messages.hpp"

namespace kagent {

/// Root supervisor of a run. Replies to `waiter` with (finish_atom, exit_code, summary_json) at the end.
caf::behavior manager_actor(caf::event_based_actor* self, context_ptr ctx, caf::actor waiter);

/// One per device: owns an evaluator, a profiler and the candidates assigned to this device.
/// Answers candidate_spec with candidate_result.
caf::behavior gpu_worker_actor(caf::event_based_actor* self, context_ptr ctx, int worker_index, int device_id,
                               caf::actor llm, caf::actor manager);

/// Detached: owns the warm Python harness of one device (or the noop backend). evaluate -> evaluation.
caf::behavior evaluator_actor(caf::event_based_actor* self, context_ptr ctx, int device_id);

/// Detached: runs profiles on one device, one at a time, under one budget per profile.
/// profile -> profile_result. A failed profile also goes to `manager` as profiling_failed (supervision).
/// (mode_atom, "synthetic") stops all further profiler invocations on this device; so does the
/// profiler's own first failure when its platform is rocm (SPEC §7.4).
caf::behavior profiler_actor(caf::event_based_actor* self, context_ptr ctx, int device_id, caf::actor manager);

/// Short-lived: profiles a parent (through `worker`), asks the LLM for its bottleneck directions
/// (or builds the synthetic one), replies analyze_parent -> parent_analysis and quits.
caf::behavior parent_analysis_actor(caf::event_based_actor* self, context_ptr ctx, caf::actor worker, caf::actor llm);

/// One in-flight candidate pipeline; sends its candidate_result to `worker` and quits.
caf::behavior candidate_actor(caf::event_based_actor* self, context_ptr ctx, candidate_spec spec, int device_id,
                              caf::actor worker, caf::actor evaluator, caf::actor profiler, caf::actor llm);

/// Concurrency cap, rate limits, retries with backoff, usage accounting. complete -> completion.
/// Usage of every call goes to `manager` as a store::llm_call_record and to `reporter` as a run_event.
caf::behavior llm_client_actor(caf::event_based_actor* self, context_ptr ctx, caf::actor manager,
                               caf::actor reporter);

/// events.jsonl, the progress line, the final summary table.
caf::behavior reporter_actor(caf::event_based_actor* self, context_ptr ctx);

/// The lock of one device: the evaluator (verify, benchmark) and the profiler hold it for each request,
/// so that a profile never runs while the same GPU is timing a kernel (SPEC §14 B.91-B.92). Detached
/// actors block on it; a holder that dies releases it (a scoped lock, not a lease to expire).
std::mutex& device_mutex(int device_id);

/// A successful profile as the run stores and shares it: {"metrics", "roofline" (or null),
/// "kernel_name", "platform", "label"}. Candidates' SOL profiles, parents' baselines and the final
/// profile of the best kernel all take this shape.
nlohmann::json profile_to_json(const profile_result& pr);

/// Turns an exception escaping a handler into a down reason that names it.
void install_exception_handler(caf::scheduled_actor* self, const char* who);

} // namespace kagent
