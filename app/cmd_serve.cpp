// `kagent-actors serve --listen HOST:PORT --strategy NAME`: offers this machine's devices to runs on
// other machines (README "Many nodes", actors/serve.hpp). The devices are chosen here, by the
// strategy's platform, gpu_ids and the visibility masks, exactly as a run here would choose them.
#include <iostream>
#include <memory>

#include "actors/serve.hpp"
#include "app/command.hpp"
#include "app/startup_checks.hpp"
#include "platform/common/errors.hpp"
#include "platform/common/node_auth.hpp"
#include "platform/config/config.hpp"

namespace kagent::app {
namespace {

struct serve_options {
  std::string listen = "127.0.0.1:7420";
  std::string strategy;
  std::string name;
  std::string scratch;
};

int run_serve(const serve_options& o) {
  try {
    check_environment(current_environment());
    serve_request req;
    req.listen = parse_node_address(o.listen, "--listen", true);
    if (o.strategy.empty())
      throw user_error("serve: --strategy is required (its platform and gpu_ids choose this node's devices)");
    req.cfg = load_strategy(o.strategy, config_search_dirs());
    req.name = o.name;
    req.scratch = o.scratch;
    return serve_node(req);
  } catch (const user_error& e) {
    std::cerr << "kagent-actors: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "kagent-actors: serve failed: " << e.what() << "\n";
    return 1;
  }
}

const register_command serve_command{"serve", [](CLI::App& root, int& exit_code) {
  auto opts = std::make_shared<serve_options>();
  auto* sub = root.add_subcommand("serve", "offer this machine's devices to runs on other machines (KAGENT_NODE_SECRET)");
  sub->add_option("--listen", opts->listen, "HOST:PORT to listen on (TLS); loopback unless told otherwise")
      ->capture_default_str();
  sub->add_option("--strategy", opts->strategy, "strategy whose platform and gpu_ids choose this node's devices");
  sub->add_option("--name", opts->name, "how runs name this node (default: HOST:PORT)");
  sub->add_option("--scratch", opts->scratch, "where runs' files live while they run (default: a temporary directory)");
  sub->callback([opts, &exit_code] { exit_code = run_serve(*opts); });
}};

}  // namespace
}  // namespace kagent::app
