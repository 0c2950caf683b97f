// Attacks on a node's links (issue 16), made by test code that speaks the wire protocol itself:
//   - a relay handle that an authenticated manager holds, used by a peer that never proved the secret
//     (a handle leaked, forwarded or guessed: CAF routes a message by node and actor id, so holding the
//     handle is no proof of anything) is refused at the node's relay;
//   - a node that speaks another wire version is one clear line at connect time, exit 2.
#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include <chrono>
#include <string>

#include "actors/node_link.hpp"
#include "messages/messages.hpp"
#include "platform/common/node_auth.hpp"
#include "platform/config/config.hpp"
#include "tests/e2e/e2e_util.hpp"
#include "tests/e2e_nodes/node_util.hpp"

using namespace e2e;

namespace {

using handoff_atom = caf::atom_constant<caf::atom("handoff")>;

/// What a request came back with: the reply's candidate id, or the error's text.
struct outcome {
  bool replied = false;
  std::string error;
};

outcome ask_device(caf::scoped_actor& self, const kagent::device_actor_type& dev, const kagent::evaluate& e) {
  outcome o;
  self->request(dev, std::chrono::seconds(120), e)
      .receive([&](const kagent::evaluation&) { o.replied = true; },
               [&](caf::error& err) { o.error = self->home_system().render(err) + " " + kagent::reason_of(err); });
  return o;
}

/// The run's setup for a node: configs/cpu.yaml and the matvec kernel directory.
kagent::run_setup setup_of(const std::string& run_id) {
  const auto kernel_dir = fs::path(source("examples/optimize_01_matvec"));
  return {run_id, slurp(source("configs/cpu.yaml")), slurp(kernel_dir / "input.py"), slurp(kernel_dir / "problem.py"),
          slurp(kernel_dir / "test.py")};
}

/// What an honest manager does (connect_nodes): hello, proof of the secret, the run opened.
std::vector<kagent::node_device> open_run(caf::scoped_actor& manager, const caf::actor& gk,
                                          const kagent::run_setup& setup) {
  auto& sys = manager->home_system();
  kagent::node_challenge challenge;
  manager->request(gk, std::chrono::seconds(30), kagent::node_hello{kagent::wire_version, "test", "attack-test"})
      .receive([&](kagent::node_challenge& c) { challenge = c; },
               [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  const auto proof = kagent::node_proof(secret, challenge.nonce, to_string(sys.node()), kagent::wire_version);
  manager->request(gk, std::chrono::seconds(30), kagent::node_auth{proof})
      .receive([](kagent::node_offer&) {}, [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  std::vector<kagent::node_device> devices;
  manager->request(gk, std::chrono::seconds(120), setup)
      .receive([&](std::vector<kagent::node_device>& d) { devices = std::move(d); },
               [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  return devices;
}

kagent::evaluate verify_of(const std::string& id) {
  kagent::evaluate e;
  e.candidate_id = id;
  e.code = slurp(source("examples/optimize_01_matvec/input.py"));
  e.mode = kagent::device_mode::verify;
  e.work_dir = "candidates/" + id;
  return e;
}

} // namespace

TEST(NodeAttacks, ARelayHandleInTheHandsOfAPeerThatNeverProvedTheSecretIsRefused) {
  scratch s;
  node_process node(s, "nodeA");
  ASSERT_NE(node.port, 0);

  // The honest manager: proves the secret and opens a run, as connect_nodes does.
  kagent::link_system_config honest_cfg{{}};
  caf::actor_system honest{honest_cfg};
  caf::scoped_actor manager{honest};
  auto gk = caf::openssl::remote_actor(honest, "127.0.0.1", node.port);
  ASSERT_TRUE(gk) << honest.render(gk.error());
  const auto setup = setup_of("attack");
  const auto devices = open_run(manager, *gk, setup);
  ASSERT_FALSE(devices.empty());
  const auto relay = devices.front().handle;

  // The honest manager hands its relay handle to whoever asks (a leak, a careless forward).
  auto handoff = honest.spawn([relay](caf::event_based_actor*) -> caf::behavior {
    return {[relay](handoff_atom) { return relay; }};
  });
  auto leaked_port = honest.middleman().publish(handoff, 0, "127.0.0.1");
  ASSERT_TRUE(leaked_port) << honest.render(leaked_port.error());

  // The attacker: its own node, connected to the honest manager, never to the node's secret.
  kagent::link_system_config attacker_cfg{{}};
  caf::actor_system attacker{attacker_cfg};
  caf::scoped_actor thief{attacker};
  auto leaker = attacker.middleman().remote_actor("127.0.0.1", *leaked_port);
  ASSERT_TRUE(leaker) << attacker.render(leaker.error());
  kagent::device_actor_type stolen;
  thief->request(*leaker, std::chrono::seconds(30), handoff_atom::value)
      .receive([&](kagent::device_actor_type& d) { stolen = d; }, [&](caf::error& e) { FAIL() << attacker.render(e); });
  ASSERT_TRUE(stolen);
  EXPECT_EQ(stolen->node(), relay->node()) << "the attacker holds a handle to the node's relay itself";

  auto work = verify_of("stolen");
  const auto refused = ask_device(thief, stolen, work);
  EXPECT_FALSE(refused.replied) << "a peer that never proved the secret got its kernel run on the node";
  EXPECT_NE(refused.error.find("unauthenticated: this node serves only managers that proved its secret"),
            std::string::npos)
      << refused.error;
  // Opening a run of its own is refused as well.
  thief->request(*gk, std::chrono::seconds(30), setup)
      .receive([](std::vector<kagent::node_device>&) { ADD_FAILURE() << "an unauthenticated peer opened a run"; },
               [&](caf::error& e) {
                 EXPECT_NE(kagent::reason_of(e).find("unauthenticated"), std::string::npos) << attacker.render(e);
               });

  // The control: the same request from the manager that proved the secret runs on the node.
  const auto served = ask_device(manager, relay, verify_of("honest"));
  EXPECT_TRUE(served.replied) << served.error;
  anon_send_exit(handoff, caf::exit_reason::user_shutdown);
}

TEST(NodeAttacks, ANodeOfAnotherWireVersionIsOneClearLineAtConnect) {
  scratch s;
  // A node as an older binary would be: its links carry another application identifier.
  kagent::link_system_config cfg{{}};
  cfg.set("middleman.app-identifiers", std::vector<std::string>{"kagent-wire-0"});
  caf::actor_system old_node{cfg};
  auto gatekeeper = old_node.spawn([](caf::event_based_actor*) -> caf::behavior {
    return {[](const kagent::node_hello&) { return kagent::node_challenge{"nonce", "old", "0.0"}; }};
  });
  auto port = caf::openssl::publish(gatekeeper, 0, "127.0.0.1");
  ASSERT_TRUE(port) << old_node.render(port.error());
  const auto address = "127.0.0.1:" + std::to_string(*port);

  auto r = run({"--strategy", "cpu", "--kernel-dir", source("examples/optimize_01_matvec"), "--run-dir",
                (s.dir / "runs").string(), "--node", address},
               {{"KAGENT_NODE_SECRET", secret}});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("node " + address + " runs another kagent-actors wire version (this one speaks kagent-wire-" +
                       std::to_string(kagent::wire_version)),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(run_dirs(s.dir / "runs").empty());
  auto listed = run({"gpus", "--node", address}, {{"KAGENT_NODE_SECRET", secret}});
  EXPECT_EQ(listed.exit_code, 2) << listed.out << listed.err;
  EXPECT_NE(listed.err.find("it runs another kagent-actors wire version"), std::string::npos) << listed.err;
  anon_send_exit(gatekeeper, caf::exit_reason::user_shutdown);
}

TEST(NodeAttacks, ACancelInOneRunDoesNotReachTheSameCandidateIdOfAnotherRun) {
  // Candidate ids repeat from run to run, and a node serves many runs: r1_c0 cancelled (timed out) in
  // one run must not be "cancelled before it reached the device" in the next.
  scratch s;
  node_process node(s, "nodeA");
  ASSERT_NE(node.port, 0);
  kagent::link_system_config cfg{{}};
  caf::actor_system sys{cfg};
  caf::scoped_actor first{sys};
  auto gk = caf::openssl::remote_actor(sys, "127.0.0.1", node.port);
  ASSERT_TRUE(gk) << sys.render(gk.error());
  const auto one = open_run(first, *gk, setup_of("first"));
  ASSERT_FALSE(one.empty());
  first->send(one.front().handle, kagent::cancel_atom::value, std::string("r1_c0"));
  const auto cancelled = [&] {
    kagent::evaluation out;
    first->request(one.front().handle, std::chrono::seconds(120), verify_of("r1_c0"))
        .receive([&](kagent::evaluation& e) { out = std::move(e); }, [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
    return out;
  }();
  EXPECT_EQ(cancelled.candidate_id, "r1_c0") << "the manager gets its own id back";
  EXPECT_EQ(cancelled.error, "cancelled before it reached the device") << "the cancel reached its own run";

  caf::scoped_actor second{sys};  // another run, opened while the first is still open
  const auto two = open_run(second, *gk, setup_of("second"));
  ASSERT_FALSE(two.empty());
  kagent::evaluation fresh;
  second->request(two.front().handle, std::chrono::seconds(120), verify_of("r1_c0"))
      .receive([&](kagent::evaluation& e) { fresh = std::move(e); }, [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  EXPECT_EQ(fresh.candidate_id, "r1_c0");
  EXPECT_NE(fresh.error, "cancelled before it reached the device");
  EXPECT_TRUE(fresh.verified) << fresh.error;
}
