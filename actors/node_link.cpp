// The links between a run and its nodes (actors/node_link.hpp): the link settings, the manager's
// connection to its nodes (at start and again while the run lasts), its relay to a node's device,
// and what a node offers.
#include "actors/node_link.hpp"

#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include <openssl/pem.h>

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include "platform/common/env.hpp"
#include "platform/common/errors.hpp"
#include "platform/store/node_scratch.hpp"

namespace kagent {

namespace fs = std::filesystem;

namespace {

/// Whether `path` holds a PEM private key that opens with `passphrase` (CAF would abort the process at
/// the first connection otherwise).
bool private_key_loads(const std::string& path, const std::string& passphrase) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return false;
  EVP_PKEY* key = PEM_read_PrivateKey(f, nullptr, nullptr, const_cast<char*>(passphrase.c_str()));
  std::fclose(f);
  if (!key) return false;
  EVP_PKEY_free(key);
  return true;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

// ---- the manager's side -----------------------------------------------------------------------------

/// `dir` relative to the run directory, as the node maps it ("candidates/r1_c0").
std::string relative_to_run(const std::string& dir, const std::string& run_path) {
  auto rel = fs::path(dir).lexically_relative(run_path);
  return rel.empty() ? fs::path(dir).filename().string() : rel.string();
}

/// Sends `req` (evaluate or profile) to a node's device with its directory relative to the run, and
/// answers with the reply once the files the node sent back are in that directory here.
template <class Reply, class Request>
caf::result<Reply> across_link(device_actor_type::pointer self, const device_actor_type& remote,
                               const std::string& run_path, Request req) {
  const std::string local = req.work_dir;
  req.work_dir = relative_to_run(local, run_path);
  auto rp = self->make_response_promise<Reply>();
  self->request(remote, caf::infinite, req)
      .then([rp, local](Reply r) mutable {
              store::write_shipped_files(local, r.artifacts);
              r.artifacts.clear();
              rp.deliver(std::move(r));
            },
            [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  return rp;
}

template <class Reply>
std::string ask_node(caf::scoped_actor& self, const caf::actor& gk, const auto& msg, Reply& out,
                     std::chrono::seconds timeout) {
  std::string err;
  self->request(gk, timeout, msg).receive([&](Reply& r) { out = std::move(r); },
                                          [&](caf::error& e) { err = reason_of(e); });
  return err;
}


/// How far a node's handshake got.
enum class handshake_step { connect, version, hello, auth, platform, no_devices, done };

/// One node's handshake up to its offer, blocking the caller's thread: connect (TLS, wire version),
/// hello, proof of the secret (bound to this process's CAF node id, so any actor of this process may
/// then open a run there), the node's offer, and the checks of that offer (`platform` "" takes any).
/// Shared by the start (connect_nodes), a node's link actor (late and returning nodes) and
/// `gpus --node` (query_nodes).
struct handshake {
  handshake_step failed_at = handshake_step::done;
  std::string error;  ///< the connection's or the node's reason
  caf::actor gatekeeper;
  node_offer offer;
};

handshake shake_hands(caf::scoped_actor& self, const node_address& addr, const std::string& secret,
                      const std::string& platform) {
  handshake h;
  auto& sys = self->home_system();
  auto gk = caf::openssl::remote_actor(sys, addr.host, addr.port);
  if (!gk) {
    h.failed_at = gk.error() == caf::sec::incompatible_application_ids ? handshake_step::version : handshake_step::connect;
    h.error = sys.render(gk.error());
    return h;
  }
  h.gatekeeper = *gk;
  node_challenge challenge;
  if (h.error = ask_node(self, *gk, node_hello{wire_version, KAGENT_VERSION, host_name()}, challenge,
                         std::chrono::seconds(30));
      !h.error.empty()) {
    h.failed_at = handshake_step::hello;
    return h;
  }
  const auto proof = node_proof(secret, challenge.nonce, to_string(sys.node()), wire_version);
  if (h.error = ask_node(self, *gk, node_auth{proof}, h.offer, std::chrono::seconds(30)); !h.error.empty()) {
    h.failed_at = handshake_step::auth;
    return h;
  }
  if (!platform.empty() && h.offer.platform != platform) h.failed_at = handshake_step::platform;
  else if (h.offer.devices.empty()) h.failed_at = handshake_step::no_devices;
  return h;
}


} // namespace

link_system_config::link_system_config(const node_tls_config& tls) {
  set("scheduler.max-threads", std::max(2u, std::min(8u, std::thread::hardware_concurrency())));
  set("logger.verbosity", caf::atom("quiet"));
  register_messages(*this);
  configure_links(*this, tls);
}

void configure_links(caf::actor_system_config& cfg, const node_tls_config& tls, double heartbeat_s, double timeout_s) {
  cfg.load<caf::io::middleman>();
  cfg.load<caf::openssl::manager>();
  if (tls.enabled()) {
    for (const auto& [what, path] : {std::pair{"certificate", tls.certificate}, {"key", tls.key}, {"cafile", tls.cafile}})
      if (std::error_code ec; !fs::is_regular_file(path, ec))
        throw user_error(fmt::format("node_tls.{} '{}': no such file (a PEM file is expected)", what, path));
    std::string passphrase;
    if (auto kept = scrubbed_secrets(); kept.count("KAGENT_NODE_KEY_PASSPHRASE"))
      passphrase = kept.at("KAGENT_NODE_KEY_PASSPHRASE");
    else if (const char* v = std::getenv("KAGENT_NODE_KEY_PASSPHRASE"))
      passphrase = v;
    if (!private_key_loads(tls.key, passphrase))
      throw user_error(fmt::format("node_tls.key '{}': the private key does not load{}", tls.key,
                                   passphrase.empty() ? " (encrypted? set KAGENT_NODE_KEY_PASSPHRASE)"
                                                      : " with KAGENT_NODE_KEY_PASSPHRASE"));
    cfg.openssl_certificate = tls.certificate;
    cfg.openssl_key = tls.key;
    cfg.openssl_cafile = tls.cafile;
    cfg.openssl_passphrase = passphrase;
  }
  using ms = std::chrono::milliseconds;
  cfg.set("middleman.heartbeat-interval", caf::timespan{ms{static_cast<long>(heartbeat_s * 1000)}});
  cfg.set("middleman.connection-timeout", caf::timespan{ms{static_cast<long>(timeout_s * 1000)}});
  cfg.set("middleman.app-identifiers", std::vector<std::string>{"kagent-wire-" + std::to_string(wire_version)});
}

std::vector<node_session> connect_nodes(caf::scoped_actor& self, const run_context& ctx, const std::string& run_id,
                                        int first_id) {
  std::vector<node_session> out;
  if (ctx.cfg.nodes.empty()) return out;
  const auto secret = node_secret_from_env();
  const run_setup setup{run_id, to_yaml(ctx.cfg), ctx.input_code, ctx.problem_code, ctx.test_code};
  int next = first_id;
  for (const auto& text : ctx.cfg.nodes) {
    node_session session;
    session.address = text;
    const auto h = shake_hands(self, parse_node_address(text, "nodes:"), secret, ctx.cfg.platform.verifier);
    switch (h.failed_at) {
      case handshake_step::version:
        throw user_error(fmt::format("node {} runs another kagent-actors wire version (this one speaks kagent-wire-{}, "
                                     "kagent-actors {}): use the same version on both sides",
                                     text, wire_version, KAGENT_VERSION));
      case handshake_step::connect:
        session.unreachable =
            fmt::format("cannot connect ({}); is `kagent-actors serve --listen {}` running there?", h.error, text);
        out.push_back(std::move(session));
        continue;
      case handshake_step::hello:
      case handshake_step::auth:
        throw user_error(fmt::format("node {} refused this run: {}", text, h.error));
      case handshake_step::platform:
        throw user_error(fmt::format("node {} serves the {} platform, this run's is {}", text, h.offer.platform,
                                     ctx.cfg.platform.verifier));
      case handshake_step::no_devices:
        throw user_error(fmt::format("node {} offers no device (its own selection found none; `kagent-actors gpus` "
                                     "there says why)",
                                     text));
      case handshake_step::done:
        break;
    }
    std::vector<node_device> devices;
    if (auto err = ask_node(self, h.gatekeeper, setup, devices, std::chrono::seconds(120)); !err.empty())
      throw user_error(fmt::format("node {} could not open this run: {}", text, err));
    const auto& offer = h.offer;
    session.gatekeeper = h.gatekeeper;
    session.gpu_name = offer.devices.front().gpu_name;
    for (const auto& d : devices) session.devices.push_back({next++, offer.node_name, d.device_id, d.name, d.handle});
    out.push_back(std::move(session));
  }
  return out;
}

std::vector<node_query> query_nodes(const std::vector<std::string>& addresses, const node_tls_config& tls) {
  std::vector<node_query> out;
  const auto secret = node_secret_from_env();
  link_system_config cfg{tls};
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  for (const auto& text : addresses) {
    node_query q;
    q.address = text;
    const auto h = shake_hands(self, parse_node_address(text, "--node"), secret, "");
    if (h.failed_at == handshake_step::version) q.error = "it runs another kagent-actors wire version";
    else if (h.failed_at == handshake_step::connect) q.error = "cannot connect (" + h.error + ")";
    else if (h.failed_at == handshake_step::hello || h.failed_at == handshake_step::auth) q.error = "refused: " + h.error;
    else q.offer = h.offer;  // an empty offer is listed as such
    out.push_back(std::move(q));
  }
  return out;
}

namespace {

using connect_atom = caf::atom_constant<caf::atom("connect")>;

struct node_link_state {
  caf::actor gatekeeper;
  bool connecting = false;
};

} // namespace

caf::behavior node_link_actor(caf::event_based_actor* self, context_ptr ctx, std::string address,
                              caf::actor gatekeeper, std::string run_id, caf::actor manager) {
  auto st = std::make_shared<node_link_state>();
  auto retry = [self](std::chrono::seconds after) { self->delayed_send(self, after, connect_atom::value); };
  auto refused = [self, manager, address, retry](const std::string& why) {
    self->send(manager, node_refused{address, why});
    retry(std::chrono::seconds(10));
  };
  if (gatekeeper) {
    st->gatekeeper = gatekeeper;
    self->monitor(gatekeeper);
  } else {
    retry(std::chrono::seconds(0));
  }
  self->set_down_handler([st, retry](caf::down_msg& dm) {
    if (st->gatekeeper && dm.source == st->gatekeeper.address()) {
      st->gatekeeper = caf::actor{};
      retry(std::chrono::seconds(1));
    }
  });
  return {
      [=](connect_atom) {
        if (st->gatekeeper || st->connecting) return;
        std::string secret;
        node_address addr;
        try {
          secret = node_secret_from_env();
          addr = parse_node_address(address, "nodes:");
        } catch (const std::exception&) {
          return;  // checked at start: cannot happen
        }
        // Blocks this (detached) actor's own thread: about one heartbeat interval when the node is not
        // there, at most a minute when it hangs mid-handshake.
        caf::scoped_actor blocking{self->home_system()};
        const auto h = shake_hands(blocking, addr, secret, ctx->cfg.platform.verifier);
        switch (h.failed_at) {
          case handshake_step::connect:
          case handshake_step::version:
            return retry(std::chrono::seconds(2));
          case handshake_step::hello:
          case handshake_step::auth:
            return refused(h.error);
          case handshake_step::platform:
            return refused("it serves the " + h.offer.platform + " platform");
          case handshake_step::no_devices:
            return refused("it offers no device");
          case handshake_step::done:
            break;
        }
        // The run is opened by this actor: the node ends it when its opener is gone.
        st->connecting = true;
        const auto node = h.gatekeeper;
        const auto name = h.offer.node_name;
        const run_setup setup{run_id, to_yaml(ctx->cfg), ctx->input_code, ctx->problem_code, ctx->test_code};
        self->request(node, std::chrono::seconds(120), setup)
            .then(
                [=](const std::vector<node_device>& devices) {
                  st->connecting = false;
                  st->gatekeeper = node;
                  self->monitor(node);
                  self->send(manager, node_joined{name, devices});
                },
                [st, refused](caf::error& e) {
                  st->connecting = false;
                  refused(reason_of(e));
                });
      },
  };
}

device_actor_type::behavior_type remote_device_actor(device_actor_type::pointer self, device_actor_type remote,
                                                     std::string run_path) {
  self->monitor(remote);
  self->set_down_handler([self, remote](caf::down_msg& dm) {
    if (dm.source == remote.address()) self->quit(dm.reason ? dm.reason : caf::error{caf::exit_reason::remote_link_unreachable});
  });
  return {
      [=](evaluate e) -> caf::result<evaluation> {
        return across_link<evaluation>(self, remote, run_path, std::move(e));
      },
      [=](profile p) -> caf::result<profile_result> {
        return across_link<profile_result>(self, remote, run_path, std::move(p));
      },
      [=](profile_batch b) -> caf::result<std::vector<profile_result>> {
        std::vector<std::string> local;
        for (auto& p : b.items) {
          local.push_back(p.work_dir);
          p.work_dir = relative_to_run(p.work_dir, run_path);
        }
        auto rp = self->make_response_promise<std::vector<profile_result>>();
        self->request(remote, caf::infinite, std::move(b))
            .then([rp, local](std::vector<profile_result> rs) mutable {
                    for (size_t i = 0; i < rs.size() && i < local.size(); ++i) {
                      store::write_shipped_files(local[i], rs[i].artifacts);
                      rs[i].artifacts.clear();
                    }
                    rp.deliver(std::move(rs));
                  },
                  [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
        return rp;
      },
      [=](cancel_atom, const std::string& id) { self->send(remote, cancel_atom::value, id); },
  };
}

} // namespace kagent
