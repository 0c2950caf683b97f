#include <CLI/CLI.hpp>

#include <iostream>

#include "app/command.hpp"

namespace kagent::app {
std::vector<command_entry>& command_registry() {
  static std::vector<command_entry> entries;
  return entries;
}
} // namespace kagent::app

int main(int argc, char** argv) {
  CLI::App app{"kagent-actors: LLM-driven GPU kernel optimization on an actor runtime"};
  int exit_code = 0;
  app.set_version_flag("--version", std::string{"kagent-actors "} + KAGENT_VERSION);
  for (auto& c : kagent::app::command_registry()) c.add(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  return exit_code;
}
