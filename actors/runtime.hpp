#pragma once
// Entry point of a run: builds the actor system, spawns the manager and waits for its verdict.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

/// Runs one strategy to completion. User errors (bad mask, unknown GPU name) come back as exit code 2.
run_outcome run_optimization(const run_request& req);

} // namespace kagent
