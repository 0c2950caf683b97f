#pragma once
// Entry point of a run: builds the actor system, spawns the manager and waits for its verdict.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/context.hpp"

#include "platform/config/config.hpp"

namespace kagent {

struct run_request {
  run_config cfg;                 ///< loaded strategy config (CLI overrides already applied)
  std::string kernel_dir;         ///< holds input.py, problem.py, test.py
  std::string run_dir_base = ".optimize";
  std::string resume_dir;         ///< non-empty: continue this run
  int extend_to_rounds = 0;       ///< > 0: --max-rounds given with --resume (may extend a finished run)
  std::string llm_record_dir;     ///< non-empty: record every LLM exchange there
  bool verbose = false;
  bool quiet = false;             ///< --quiet
};

struct run_outcome {
  int exit_code = 1;              ///< 0 success, 1 run failed, 2 usage/config error
  std::string run_path;
  nlohmann::json summary;
  std::string error;              ///< one line when exit_code != 0
};

/// Checks the kernel directory (input.py, problem.py, test.py). Throws user_error naming what is missing.
void check_kernel_dir(const std::string& dir);

/// What --resume RUN_DIR continues: the run's own config.yaml and kernel directory (from program.db).
/// Throws user_error when RUN_DIR is not a run directory, never started, or finished already and not
/// extended: a finished run is continued only when `extend_to_rounds` (--max-rounds) is beyond the
/// rounds it ran.
struct resume_target {
  std::string config_path;
  std::string kernel_dir;
  std::string strategy_name;  ///< the name the run was started with ("" when unknown)
  bool extends = false;       ///< the run had finished; --max-rounds extends it
};
resume_target read_resume_target(const std::string& run_dir, int extend_to_rounds = 0);

/// kagent-actors serve: a node's own devices under its strategy's rules (platform, masks, the vendor
/// tool), its interpreter and its environment without secrets. No kernel directory yet.
std::shared_ptr<run_context> node_base_context(const run_config& cfg);

/// One run on a node: the manager's config (its timeouts, harness and check settings) on the node's
/// platform, devices and interpreter, with the kernel directory the manager sent written to
/// `kernel_dir`; the node's evaluators keep their files under `run_path`.
context_ptr node_run_context(const run_context& base, run_config run_cfg, const std::string& kernel_dir,
                             const std::string& run_path);

/// Runs one strategy to completion. User errors (bad mask, unknown GPU name) come back as exit code 2.
run_outcome run_optimization(const run_request& req);

} // namespace kagent
