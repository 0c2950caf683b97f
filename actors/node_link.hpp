#pragma once
// The links between a run and its nodes (README "Many nodes", docs/architecture.md "Across nodes"): CAF's
// middleman with TLS (its openssl module), heartbeats and the wire version as application identifier;
// on the manager's side the connection to each node (proof of KAGENT_NODE_SECRET, the node's offer,
// the run opened there), a link actor per node that brings a late or returning node in, and the
// relay to a node's device with the device protocol (device_actor_type), so the search does not know
// whether a device is local or remote. The node's side is actors/serve.hpp.
#include <caf/all.hpp>

#include <optional>
#include <string>
#include <vector>

#include "actors/context.hpp"
#include "messages/messages.hpp"
#include "platform/common/node_auth.hpp"
#include "platform/config/config.hpp"

namespace kagent {

/// The link settings every process of a multi-node run uses: the middleman and CAF's openssl module
/// (TLS; anonymous key exchange unless certificates are configured), heartbeats (a node that stops
/// answering is lost after `timeout_s`), and the wire version as CAF's application identifier.
/// With `tls` (node_tls in the config), both sides present a certificate signed by its cafile (mutual
/// TLS); the files are checked first (one line naming the file, or the key that does not load with
/// KAGENT_NODE_KEY_PASSPHRASE), since CAF would only fail at the first connection.
void configure_links(caf::actor_system_config& cfg, const node_tls_config& tls = {}, double heartbeat_s = 1.0,
                     double timeout_s = 10.0);

/// An actor system configuration for a process of a multi-node run that is no run (serve, gpus --node):
/// the project's messages and configure_links.
struct link_system_config : caf::actor_system_config {
  explicit link_system_config(const node_tls_config& tls);
};

/// A node of the run as the start found it.
struct node_session {
  std::string address;              ///< HOST:PORT as the run names it
  caf::actor gatekeeper;            ///< invalid when it could not be reached
  std::vector<remote_device> devices;
  std::string gpu_name;             ///< the specs key of the node's first device ("" when GPU-less)
  std::string unreachable;          ///< why it could not be reached ("" when it was)
};

/// Connects to every node of ctx.cfg.nodes, proves the secret, opens the run there, and returns the
/// nodes' devices with run-unique ids (from `first_id`). `owner` opens the runs: a node ends its run
/// when the owner is gone, so it must live as long as the run. A node that cannot be reached is
/// returned as such (it may join later). Throws user_error with one line when a node refuses (wrong
/// secret, other wire version, other platform) or offers no device.
std::vector<node_session> connect_nodes(caf::scoped_actor& owner, const run_context& ctx, const std::string& run_id,
                                        int first_id);

/// What a node offers (kagent-actors gpus --node): for each address, the node's offer after proving
/// the secret, or the one-line reason it could not be had. Opens no run.
struct node_query {
  std::string address;
  std::optional<node_offer> offer;
  std::string error;
};
std::vector<node_query> query_nodes(const std::vector<std::string>& addresses, const node_tls_config& tls = {});

/// One per node of the run, on the manager's node (detached: connecting blocks its thread). It watches
/// the node's gatekeeper (`gatekeeper`, invalid when the start could not reach it) and, whenever the
/// node is not or no longer there, tries again every 2 s while the run lasts: a node that answers
/// proves the secret, opens the run again and its devices join (node_joined to `manager`); a refusal
/// is node_refused (and another try after 10 s). It owns the runs it opens on the node.
caf::behavior node_link_actor(caf::event_based_actor* self, context_ptr ctx, std::string address,
                              caf::actor gatekeeper, std::string run_id, caf::actor manager);

/// The manager's side of a node's device: forwards the device protocol, writes the files the node sent
/// back into the request's work_dir, and ends with the link's reason when the node is lost.
/// `run_path`: the run directory, which the node mirrors (work_dirs travel relative to it).
device_actor_type::behavior_type remote_device_actor(device_actor_type::pointer self, device_actor_type remote,
                                                     std::string run_path);

} // namespace kagent
