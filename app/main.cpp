// kagent-actors: the optimization run is the root command; tools (gpus, ask, inspect-profile)
// register themselves as subcommands (app/command.hpp).
#include <sys/prctl.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>
#include <string>
#include <vector>

#include "actors/runtime.hpp"
#include "app/command.hpp"
#include "app/run_command.hpp"
#include "platform/common/env.hpp"
#include "platform/common/errors.hpp"
#include "platform/common/suggest.hpp"

namespace kagent::app {
namespace {
void option_names(const CLI::App& a, std::vector<std::string>& out) {
  for (const auto* opt : a.get_options())
    for (const auto& l : opt->get_lnames()) out.push_back("--" + l);
}
}  // namespace

/// After a parse error: "did you mean --max-rounds?" for each unexpected argument that is close to a
/// flag, or to a subcommand when it is a word.
void suggest_for_leftovers(CLI::App& app, std::ostream& err) {
  std::vector<std::string> flags, commands;
  option_names(app, flags);
  for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    commands.push_back(sub->get_name());
    option_names(*sub, flags);
  }
  std::vector<std::string> left = app.remaining();
  for (const auto* sub : app.get_subcommands()) {
    auto more = sub->remaining();
    left.insert(left.end(), more.begin(), more.end());
  }
  for (const auto& arg : left) {
    const bool flag = arg.rfind("-", 0) == 0;
    const std::string word = flag ? arg.substr(0, arg.find('=')) : arg;
    if (auto n = nearest(word, flag ? flags : commands))
      err << "kagent-actors: unknown " << (flag ? "flag " : "argument ") << word << "; did you mean " << *n << "?\n";
  }
}

std::vector<command_entry>& command_registry() {
  static std::vector<command_entry> entries;
  return entries;
}
} // namespace kagent::app

int main(int argc, char** argv) {
  // Before any thread exists: secrets leave the environment (and /proc/self/environ) at once and live
  // on only in memory (docs/sandbox.md).
  // Not dumpable: no process of our user may read our memory, which keeps the API key, through
  // /proc/<pid>/mem or ptrace (an unsandboxed candidate runs as our user; as root it also needs our
  // capabilities, which harness/privileges.py takes from it). KAGENT_DUMPABLE=1 keeps core dumps and
  // debuggers working.
  if (const char* d = std::getenv("KAGENT_DUMPABLE"); !d || std::string(d) != "1") ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  kagent::scrub_own_environment(kagent::default_secret_patterns());
  CLI::App app{"kagent-actors: LLM-driven GPU kernel optimization on an actor runtime.\n"
               "Run: kagent-actors --strategy NAME|all --kernel-dir DIR [options]"};
  app.set_version_flag("--version", std::string{"kagent-actors "} + KAGENT_VERSION);
  kagent::app::run_options opts;
  kagent::app::add_run_options(app, opts);
  int exit_code = 0;
  for (auto& c : kagent::app::command_registry()) c.add(app, exit_code);
  app.require_subcommand(0, 1);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    if (rc != 0) kagent::app::suggest_for_leftovers(app, std::cerr);
    return rc == 0 ? 0 : 2;
  }
  if (!app.get_subcommands().empty()) return exit_code;
  try {
    return kagent::app::run_main(opts);
  } catch (const kagent::user_error& e) {
    std::cerr << "kagent-actors: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "kagent-actors: run failed: " << e.what() << "\n";
    return 1;
  }
}
