#pragma once
// Behaviours of every actor of a run (DESIGN.md "Actor topology"). Each is spawned by its parent
// with the shared run_context; handles are passed as spawn arguments, never inside messages.
#include <caf/all.hpp>

#include <nlohmann/json.hpp>

#include "actors/context.hpp"
#include "messages/messages.hpp"

namespace kagent {

// The manager (root supervisor of a run) is a stateful actor: actors/manager.hpp.

// The gpu worker of one device is a stateful actor: actors/gpu_worker.hpp.

// The one actor that touches a device (evaluator and profiler requests, one at a time): actors/device.hpp.

// The short-lived analysis of one parent is a stateful actor: actors/analysis.hpp.

// One in-flight candidate pipeline is a stateful actor: actors/candidate.hpp.

// The llm_client (admission, retries, accounting) is a stateful actor: actors/llm_client.hpp.

// The reporter (events.jsonl, progress line, summary, report.html) is a stateful actor: actors/reporter.hpp.

/// Turns an exception escaping a handler into a down reason that names it.
void install_exception_handler(caf::scheduled_actor* self, const char* who);

} // namespace kagent
