#pragma once
// Subcommands register themselves (one cmd_<name>.cpp each) so that main.cpp does not need to know
// them: each adds its CLI11 subcommand and, when it runs, stores the process exit code.
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace kagent::app {

struct command_entry {
  std::string name;
  /// Adds the subcommand to `root`; its callback must set `exit_code` (0 ok, 1 failed, 2 usage).
  std::function<void(CLI::App& root, int& exit_code)> add;
};

std::vector<command_entry>& command_registry();

struct register_command {
  register_command(std::string name, std::function<void(CLI::App&, int&)> add) {
    command_registry().push_back({std::move(name), std::move(add)});
  }
};

} // namespace kagent::app
