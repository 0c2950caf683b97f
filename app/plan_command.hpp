#pragma once
// `--print-config` and `--dry-run` of the root command: the resolved strategy config (after the
// command line's overrides) and the plan of the run it would start (search, platform, devices,
// candidates, the most LLM calls, an estimated token and cost range). Neither creates a directory
// nor contacts an LLM.
#include <functional>

#include "app/run_command.hpp"
#include "platform/config/config.hpp"

namespace kagent::app {

/// Prints what o.print_config / o.dry_run ask for and returns the exit code (0); throws user_error
/// for a strategy, resume directory or kernel directory that a run would refuse. `apply` applies the
/// command line's overrides (--max-rounds, --model, --gpu-ids) to a loaded config, as a run does.
int plan_main(const run_options& o, const std::function<void(run_config&)>& apply);

/// The most candidates and LLM calls a run of `cfg` can make (the config's search settings).
struct llm_call_bound {
  int rounds = 0;
  long candidates_round1 = 0;     ///< round 1 expands the starting kernel only
  long candidates_later = 0;      ///< per later round, at most
  long candidates = 0;            ///< in all rounds, at most
  long per_candidate = 0;         ///< 1 optimize + max_refine_attempts + 1 reflexion
  long analyses = 0;              ///< bottleneck analyses (one per distinct parent), at most
  long calls_max = 0;             ///< candidates x per_candidate + analyses
  long calls_min = 0;             ///< every first draft verifies: candidates x 2 + analyses
};
llm_call_bound bound_llm_calls(const run_config& cfg);

} // namespace kagent::app
