#pragma once
// `kagent-actors serve --listen HOST:PORT`: a node offers its devices to runs on other machines
// (README "Many nodes", docs/architecture.md "Across nodes"). It chooses its devices by its own rules
// and publishes one actor, its gatekeeper: a manager proves the shared secret (KAGENT_NODE_SECRET,
// challenge and response: platform/common/node_auth.hpp) and opens its run, whose kernel directory
// the gatekeeper writes to the node's scratch directory before it starts one device actor per device
// behind a relay. The relay checks on every request that it comes from an authenticated manager, runs
// it in the node's copy of the request's directory and sends back what the work wrote (artifacts).
// When the manager's link goes, the node ends that run's device actors and deletes its files.
#include <string>

#include "platform/common/node_auth.hpp"
#include "platform/config/config.hpp"

namespace kagent {

struct serve_request {
  run_config cfg;        ///< the node's strategy: its platform and device rules
  node_address listen;   ///< loopback unless told otherwise
  std::string name;      ///< how runs name this node (default: host:port)
  std::string scratch;   ///< where runs' kernel directories and evaluator files live while they run
};

/// kagent-actors serve: publishes the gatekeeper and serves until SIGINT/SIGTERM. Returns the exit code.
int serve_node(const serve_request& req);

} // namespace kagent
