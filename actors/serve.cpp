// `kagent-actors serve` (actors/serve.hpp): the node's gatekeeper and its device relays.
#include "actors/serve.hpp"

#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "actors/actors.hpp"
#include "actors/device.hpp"
#include "actors/node_link.hpp"
#include "actors/runtime.hpp"
#include "platform/common/errors.hpp"
#include "platform/common/files.hpp"
#include "platform/common/stop.hpp"
#include "platform/process/runner.hpp"
#include "platform/store/node_scratch.hpp"

namespace kagent {

namespace fs = std::filesystem;

namespace {

/// The managers that proved the secret, by CAF node id; read by every relay on every request.
struct node_auth_db {
  mutable std::mutex m;
  std::set<caf::node_id> ok;
  bool allows(const caf::node_id& n) const {
    std::lock_guard<std::mutex> lock(m);
    return ok.count(n) > 0;
  }
  void add(const caf::node_id& n) {
    std::lock_guard<std::mutex> lock(m);
    ok.insert(n);
  }
};

/// A candidate's id as this node's process knows it: candidate ids repeat from run to run (r1_c0), and
/// one node serves many runs, at once or one after another, while a cancelled id is never forgotten in
/// a process (platform/common/stop.hpp). So every id a relay passes on carries its run's tag.
std::string on_node(const std::string& id, const std::string& run_tag) { return id.empty() ? id : id + "@" + run_tag; }

/// Runs `req` (evaluate or profile) on `device` in this node's copy of its directory and answers with
/// the reply and the files the work wrote there.
template <class Reply, class Self, class Request>
caf::result<Reply> in_node_dir(Self* self, const device_actor_type& device, const fs::path& run_root,
                               const std::string& run_tag, Request req) {
  const auto dir = store::node_work_dir(run_root, req.work_dir);
  fs::create_directories(dir);
  const auto before = store::stamp_files(dir);
  req.work_dir = dir.string();
  const auto id = req.candidate_id;
  req.candidate_id = on_node(id, run_tag);
  auto rp = self->template make_response_promise<Reply>();
  self->request(device, caf::infinite, req)
      .then([rp, dir, before, id](Reply r) mutable {
              r.artifacts = store::files_written_since(dir, before);
              r.candidate_id = id;
              rp.deliver(std::move(r));
            },
            [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  return rp;
}

/// A profile batch in this node's copies of its items' directories; each reply carries what the work
/// wrote in its own directory.
template <class Self>
caf::result<std::vector<profile_result>> batch_in_node_dirs(Self* self, const device_actor_type& device,
                                                            const fs::path& run_root, const std::string& run_tag,
                                                            profile_batch b) {
  std::vector<fs::path> dirs;
  std::vector<store::file_stamps> before;
  std::vector<std::string> ids;
  for (auto& p : b.items) {
    ids.push_back(p.candidate_id);
    p.candidate_id = on_node(p.candidate_id, run_tag);
    dirs.push_back(store::node_work_dir(run_root, p.work_dir));
    fs::create_directories(dirs.back());
    before.push_back(store::stamp_files(dirs.back()));
    p.work_dir = dirs.back().string();
  }
  auto rp = self->template make_response_promise<std::vector<profile_result>>();
  self->request(device, caf::infinite, std::move(b))
      .then([rp, dirs, before, ids](std::vector<profile_result> rs) mutable {
              for (size_t i = 0; i < rs.size() && i < dirs.size(); ++i) {
                rs[i].artifacts = store::files_written_since(dirs[i], before[i]);
                rs[i].candidate_id = ids[i];
              }
              rp.deliver(std::move(rs));
            },
            [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
  return rp;
}

struct relay_state {
  static inline const char* name = "node_device";
};

/// A device of this node, for one run: checks that every request comes from an authenticated manager,
/// runs it in this node's copy of the request's directory, and sends back what it wrote there.
device_actor_type::behavior_type node_device_relay(device_actor_type::stateful_pointer<relay_state> self,
                                                   device_actor_type device,
                                                   std::shared_ptr<const node_auth_db> auth, fs::path run_root) {
  self->link_to(device);
  const std::string run_tag = run_root.parent_path().filename().string();
  // The device actor tells its requester the steps of an initial evaluation: not across the link.
  self->set_default_handler(caf::drop);
  auto allowed = [self, auth] {
    const auto& s = self->current_sender();
    return s && (s->node() == self->home_system().node() || auth->allows(s->node()));
  };
  auto refused = [] { return make_error(errc::node_refused, "unauthenticated: this node serves only managers that proved its secret"); };
  return {
      [=](evaluate e) -> caf::result<evaluation> {
        if (!allowed()) return refused();
        return in_node_dir<evaluation>(self, device, run_root, run_tag, std::move(e));
      },
      [=](profile p) -> caf::result<profile_result> {
        if (!allowed()) return refused();
        return in_node_dir<profile_result>(self, device, run_root, run_tag, std::move(p));
      },
      [=](profile_batch b) -> caf::result<std::vector<profile_result>> {
        if (!allowed()) return refused();
        return batch_in_node_dirs(self, device, run_root, run_tag, std::move(b));
      },
      // Here, not in the device actor's mailbox (it is blocked in the work being cancelled).
      [=](cancel_atom, const std::string& id) {
        if (allowed()) cancel_work(on_node(id, run_tag));
      },
  };
}

class gatekeeper_state {
public:
  static inline const char* name = "gatekeeper";

  caf::behavior start(caf::stateful_actor<gatekeeper_state>* self, std::shared_ptr<const run_context> base,
                      std::string secret, std::shared_ptr<const std::string> node_name, fs::path scratch,
                      std::shared_ptr<node_auth_db> auth) {
    self_ = self;
    base_ = std::move(base);
    secret_ = std::move(secret);
    name_ = std::move(node_name);
    scratch_ = std::move(scratch);
    auth_ = std::move(auth);
    self->set_down_handler([this](caf::down_msg& dm) { on_down(dm); });
    return {
        [this](const node_hello& h) { return hello(h); },
        [this](const node_auth& a) { return authenticate(a); },
        [this](const run_setup& s) { return open_run(s); },
        [this](node_logs_atom) { return run_logs(); },
        [this](interrupt_atom, int) {
          while (!runs_.empty()) close_run(runs_.begin()->first, "the node is stopping", true);
          self_->quit();
        },
    };
  }

private:
  struct open_run_state {
    std::vector<caf::actor> actors;  ///< the run's device actors and relays
    store::node_scratch_run scratch;
  };

  caf::node_id sender_node() const {
    const auto& s = self_->current_sender();
    return s ? s->node() : caf::node_id{};
  }

  void log(const std::string& line) const { std::cerr << "kagent-actors serve: " << line << "\n" << std::flush; }

  caf::result<node_challenge> hello(const node_hello& h) {
    if (!self_->current_sender()) return make_error(errc::node_refused, "anonymous senders are refused");
    if (h.wire != wire_version)
      return make_error(errc::node_refused,
                        fmt::format("version mismatch: node {} runs kagent-actors {} (wire {}), this run {} (wire {}); "
                                    "use the same version on both sides",
                                    *name_, KAGENT_VERSION, wire_version, h.version, h.wire));
    const auto nonce = fresh_nonce();
    nonces_[sender_node()] = nonce;
    if (!h.client.empty()) clients_[sender_node()] = h.client;
    return node_challenge{nonce, *name_, KAGENT_VERSION};
  }

  caf::result<node_offer> authenticate(const node_auth& a) {
    const auto from = sender_node();
    auto it = nonces_.find(from);
    if (it == nonces_.end()) return make_error(errc::node_refused, "authentication out of order: say hello first");
    const auto expected = node_proof(secret_, it->second, to_string(from), wire_version);
    nonces_.erase(it);  // one try per nonce
    if (!proofs_match(expected, a.proof)) {
      log("refused a manager on " + clients_[from] + ": wrong secret");
      return make_error(errc::node_refused, fmt::format("authentication failed: node {} has another {}", *name_,
                                                         node_secret_env));
    }
    auth_->add(from);
    log("a manager on " + clients_[from] + " authenticated");
    node_offer o;
    o.node_name = *name_;
    o.platform = base_->cfg.platform.verifier;
    o.vendor = base_->vendor;
    for (size_t k = 0; k < base_->device_ids.size(); ++k)
      o.devices.push_back({base_->device_ids[k], k < base_->device_names.size() ? base_->device_names[k] : "cpu",
                           base_->gpu_name});
    return o;
  }

  caf::result<std::vector<node_device>> open_run(const run_setup& s) {
    const auto& from = self_->current_sender();
    if (!from || !auth_->allows(from->node()))
      return make_error(errc::node_refused, "unauthenticated: prove the secret before opening a run");
    run_config cfg;
    try {
      cfg = parse_config(s.config_yaml, "the run's config (from its manager)");
    } catch (const std::exception& e) {
      return make_error(errc::node_refused, std::string("the run's config does not load here: ") + e.what());
    }
    if (cfg.platform.verifier != base_->cfg.platform.verifier)
      return make_error(errc::node_refused, fmt::format("node {} serves the {} platform, this run's is {}", *name_,
                                                         base_->cfg.platform.verifier, cfg.platform.verifier));
    std::vector<node_device> out;
    store::node_scratch_run scratch;
    try {
      scratch = store::open_node_scratch_run(scratch_, s.run_id, ++opened_, s.input_code, s.problem_code, s.test_code);
      auto ctx = node_run_context(*base_, cfg, scratch.kernel_dir().string(), scratch.run_dir().string());
      auto& run = runs_[from->address()];
      run.scratch = scratch;
      for (size_t k = 0; k < ctx->device_ids.size(); ++k) {
        const int id = ctx->device_ids[k];
        auto dev = self_->spawn<caf::detached>(device_actor, context_ptr{ctx}, id);
        warm_device(self_, dev);
        auto relay = self_->spawn(node_device_relay, dev, std::shared_ptr<const node_auth_db>{auth_}, scratch.run_dir());
        run.actors.push_back(caf::actor_cast<caf::actor>(dev));
        run.actors.push_back(caf::actor_cast<caf::actor>(relay));
        out.push_back({id, k < ctx->device_names.size() ? ctx->device_names[k] : "cpu", relay});
      }
    } catch (const std::exception& e) {
      return make_error(errc::node_refused, std::string("the run could not start here: ") + e.what());
    }
    self_->monitor(caf::actor_cast<caf::actor>(from));
    log(fmt::format("run {} opened: {} device(s), files under {}", s.run_id, out.size(), scratch.dir.string()));
    return out;
  }

  /// The evaluator logs of the run the sender opened (its devices' workers/), bounded like every reply.
  caf::result<std::vector<artifact>> run_logs() {
    const auto& from = self_->current_sender();
    if (!from || !auth_->allows(from->node()))
      return make_error(errc::node_refused, "unauthenticated: prove the secret before asking for a run's logs");
    auto it = runs_.find(from->address());
    if (it == runs_.end()) return std::vector<artifact>{};
    return store::files_written_since(it->second.scratch.run_dir() / "workers", {});
  }

  // The run's actors are killed and its files removed at once; the removal is repeated, and the run
  // said closed, once every one of its actors is down: a detached device actor ends after its kill
  // arrives, and what it wrote meanwhile (its evaluator's last log lines) must not outlive the run.
  // A stopping node (`quit_after`) removes once and says so at once.
  void close_run(const caf::actor_addr& manager, const std::string& why, bool quit_after = false) {
    auto it = runs_.find(manager);
    if (it == runs_.end()) return;
    const int key = ++closings_;
    auto& c = closing_[key];
    c.scratch = it->second.scratch;
    c.why = why;
    for (auto& a : it->second.actors) {
      if (!quit_after) {
        closing_of_[a.address()] = key;
        ++c.left;
        self_->monitor(a);
      }
      self_->send_exit(a, caf::exit_reason::kill);
    }
    runs_.erase(it);
    store::remove_node_scratch_run(c.scratch);
    if (c.left == 0) closed(key);
  }

  void on_down(const caf::down_msg& dm) {
    auto it = closing_of_.find(dm.source);
    if (it == closing_of_.end()) return close_run(dm.source, "its manager's link is gone");
    const int key = it->second;
    closing_of_.erase(it);
    if (--closing_[key].left == 0) closed(key);
  }

  void closed(int key) {
    auto& c = closing_[key];
    store::remove_node_scratch_run(c.scratch);
    log(fmt::format("run closed ({}); {} removed", c.why, c.scratch.dir.string()));
    closing_.erase(key);
  }

  caf::stateful_actor<gatekeeper_state>* self_ = nullptr;
  std::shared_ptr<const run_context> base_;
  std::string secret_;
  std::shared_ptr<const std::string> name_;  ///< set by serve_node once the port is known
  fs::path scratch_;
  std::shared_ptr<node_auth_db> auth_;
  std::map<caf::node_id, std::string> nonces_;
  std::map<caf::node_id, std::string> clients_;  ///< the host each manager said it runs on (for the log)
  std::map<caf::actor_addr, open_run_state> runs_;
  int opened_ = 0;
  struct closing_run {
    store::node_scratch_run scratch;
    std::string why;
    size_t left = 0;  ///< its actors not down yet
  };
  std::map<int, closing_run> closing_;           ///< runs whose actors are being killed
  std::map<caf::actor_addr, int> closing_of_;    ///< actor -> its closing run
  int closings_ = 0;
};

caf::behavior gatekeeper_actor(caf::stateful_actor<gatekeeper_state>* self, std::shared_ptr<const run_context> base,
                               std::string secret, std::shared_ptr<const std::string> node_name, fs::path scratch,
                               std::shared_ptr<node_auth_db> auth) {
  return self->state.start(self, std::move(base), std::move(secret), std::move(node_name), std::move(scratch),
                           std::move(auth));
}

} // namespace

int serve_node(const serve_request& req) {
  const auto secret = node_secret_from_env();
  std::shared_ptr<const run_context> base = node_base_context(req.cfg);

  const fs::path scratch = req.scratch.empty() ? fs::temp_directory_path() / fmt::format("kagent-node-{}", getpid())
                                               : fs::path(req.scratch);
  fs::create_directories(scratch);
  link_system_config cfg{req.cfg.node_tls};
  caf::actor_system sys{cfg};
  auto auth = std::make_shared<node_auth_db>();
  // The gatekeeper learns its name once the port is known (a listener on port 0 takes any free one).
  auto name = std::make_shared<std::string>(req.name);
  auto gk = sys.spawn(gatekeeper_actor, base, secret, name, scratch, auth);
  auto port = caf::openssl::publish(gk, req.listen.port, req.listen.host.c_str(), true);
  if (!port) {
    caf::anon_send_exit(gk, caf::exit_reason::user_shutdown);
    throw user_error(fmt::format("serve: cannot listen on {}: {}", req.listen.text(), sys.render(port.error())));
  }
  if (name->empty()) *name = node_address{req.listen.host, *port}.text();
  std::string devices;
  for (size_t k = 0; k < base->device_ids.size(); ++k)
    devices += fmt::format("{}gpu{} ({})", k ? ", " : "", base->device_ids[k],
                           k < base->device_names.size() ? base->device_names[k] : base->cfg.platform.verifier);
  std::cout << fmt::format("kagent-actors serve: node {} listening on {}:{} (TLS), {} platform, {} device(s){}{}\n",
                           *name, req.listen.host, *port, base->cfg.platform.verifier, base->device_ids.size(),
                           devices.empty() ? "" : ": ", devices)
            << std::flush;
  install_stop_handlers();
  while (stop_signal() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::cout << "kagent-actors serve: " << stop_signal_name(stop_signal()) << ": stopping\n" << std::flush;
  request_stop();
  signal_child_groups(SIGKILL);
  caf::anon_send(gk, interrupt_atom::value, 0);
  remove_stop_handlers();
  std::error_code ec;
  if (req.scratch.empty()) fs::remove_all(scratch, ec);
  return 0;
}

} // namespace kagent
