#pragma once
// Why a candidate (or the starting kernel) failed: the closed set of causes the runtime records.
// In memory and between actors it is this enum; program.db's failure_cause column, events.jsonl and
// summary.json hold its name (to_string), and parse_failure_kind reads a name back.
#include <cstdint>
#include <optional>
#include <string_view>

namespace kagent {

enum class failure_kind : uint8_t {
  verification,  ///< the outputs did not match the reference
  benchmark,     ///< verified, but the timed run failed
  timeout,       ///< the evaluator's step or the candidate's whole budget (candidate_timeout_s) ran out
  crash,         ///< the candidate's process died (signal, poisoned device) or its evaluator was gone
  harness,       ///< the evaluator itself misbehaved (protocol error, could not start)
  banned,        ///< the code uses PyTorch compute the rules forbid
  integrity,     ///< a cheat seen by the trusted evaluation
  user_test,     ///< the kernel directory's own test.py failed
  problem,       ///< the kernel directory's problem.py failed (not the kernel)
  llm,           ///< the LLM call failed
  no_code,       ///< the LLM's reply held no usable kernel
  duplicate,     ///< the same compiled code as a program verified before
  actor_down,    ///< the actor running it failed
  interrupted,   ///< the run was stopped while it ran
  node_down,     ///< its node was lost and no other device was left to run it
  unknown,       ///< a failure that named no cause
};

/// The name stored in program.db and written to events.jsonl ("verification", "no_code", ...).
const char* to_string(failure_kind k);
/// The cause a stored name stands for; none for a name this version does not know.
std::optional<failure_kind> parse_failure_kind(std::string_view name);

}  // namespace kagent
