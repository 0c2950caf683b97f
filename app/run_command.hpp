#pragma once
// The root command: run one strategy (or all that fit this host) on a kernel directory.
#include <CLI/CLI.hpp>

#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace kagent::app {

struct run_options {
  std::string kernel_dir;
  std::string strategy = "beam_search";  ///< as the README says; `noop` is the explicit dry run
  static constexpr int unset = std::numeric_limits<int>::min();
  int max_rounds = unset;       ///< unset: the config's
  std::string run_dir = ".optimize";
  std::string resume;
  std::string model;
  std::string provider;         ///< llm.provider (like `ask --provider`)
  std::string base_url;         ///< llm.base_url
  std::optional<double> budget_usd;  ///< llm.budget_usd; unset: the config's
  std::string gpu_ids;          ///< "0,1"
  std::vector<std::string> nodes;  ///< --node HOST:PORT, repeatable
  bool no_local_devices = false;
  std::string llm_record;
  bool list_strategies = false;
  bool verbose = false;
  bool quiet = false;           ///< --quiet: errors, the end of the run and the summary only
  bool print_config = false;    ///< print the resolved config and exit (app/plan_command.cpp)
  bool dry_run = false;         ///< print the plan and exit
};

void add_run_options(CLI::App& app, run_options& o);

/// Runs and returns the process exit code; throws user_error for usage/config errors.
int run_main(const run_options& o);

} // namespace kagent::app
