// Many nodes end to end (issue 16): `kagent-actors serve` processes on loopback offering cpu devices,
// runs that use them with --node, and the faults: a node killed with -9 mid-run, a wrong secret, a
// node nobody serves, a node without devices.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <set>
#include <thread>

#include "platform/store/program_db.hpp"
#include "tests/e2e/e2e_util.hpp"
#include "tests/e2e_nodes/node_util.hpp"

using namespace e2e;
namespace fs = std::filesystem;

namespace {

/// configs/cpu.yaml with `num_workers` pipelines (one per device of the run) and `rounds` rounds. The
/// kernel directory's test.py is not run (`user_test: never`): these runs are about the nodes, and each
/// test.py is a fresh interpreter importing torch on a 2-core machine (UserTest covers it end to end).
std::string cpu_config(const scratch& s, int num_workers, int rounds) {
  auto cfg = slurp(source("configs/cpu.yaml")) + "user_test: never\n";
  cfg.replace(cfg.find("num_workers: 2"), 14, "num_workers: " + std::to_string(num_workers));
  cfg.replace(cfg.find("max_rounds: 3"), 13, "max_rounds: " + std::to_string(rounds));
  return s.write("cpu_nodes.yaml", cfg);
}

std::vector<kagent::store::program_record> programs_of(const fs::path& run) {
  auto db = kagent::store::program_db::open(run / "program.db", kagent::store::program_db::mode::read_only);
  return db.list_programs();
}

} // namespace

namespace {
/// The events of the one run under `runs` so far.
std::vector<nlohmann::json> events_so_far(const fs::path& runs) {
  std::vector<nlohmann::json> out;
  auto dirs = run_dirs(runs);
  if (dirs.empty()) return out;
  std::ifstream f(dirs.front() / "events.jsonl");
  std::string line;
  while (std::getline(f, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object()) out.push_back(j);
  }
  return out;
}

int count_events(const std::vector<nlohmann::json>& ev, const std::string& type) {
  int n = 0;
  for (const auto& e : ev) n += e.value("type", "") == type;
  return n;
}

bool wait_for(const std::function<bool()>& pred, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}
} // namespace

/// A run in the background on `node` (and the local device) whose LLM replies take 1.5 s each, so that
/// candidates stay in flight long enough for a test to kill something under one.
pid_t start_slow_run(const scratch& s, const std::string& cfg, const fs::path& runs, const std::string& node) {
  return spawn_logged({"--strategy", cfg, "--kernel-dir", source("examples/optimize_01_matvec"), "--run-dir",
                       runs.string(), "--node", node},
                      {{"KAGENT_NODE_SECRET", secret}, {"KAGENT_REPLAY_DELAY_S", "1.5"}}, s.dir / "run.log");
}

TEST(Nodes, ASearchAcrossThreeProcessesFindsTheSameBestKernelAsOne) {
  scratch s;
  const auto cfg = cpu_config(s, 3, 2);
  const auto matvec = source("examples/optimize_01_matvec");
  auto one = run({"--strategy", cfg, "--kernel-dir", matvec, "--run-dir", (s.dir / "one").string(), "-q"});
  ASSERT_EQ(one.exit_code, 0) << one.out << one.err;

  node_process a(s, "nodeA"), b(s, "nodeB");
  auto many = run({"--strategy", cfg, "--kernel-dir", matvec, "--run-dir", (s.dir / "many").string(), "-q", "--node",
                   a.address(), "--node", b.address()},
                  {{"KAGENT_NODE_SECRET", secret}});
  ASSERT_EQ(many.exit_code, 0) << many.out << many.err << slurp(a.log) << slurp(b.log);
  const auto r1 = run_dirs(s.dir / "one").front(), r3 = run_dirs(s.dir / "many").front();
  // On a failure, how every candidate of both runs ended (the CI machine's scratch is gone after it).
  auto how_they_ended = [](const fs::path& run) {
    std::string out;
    for (const auto& p : programs_of(run))
      out += p.id + " gpu" + std::to_string(p.gpu_id.value_or(-1)) + " " + p.status + " " +
             p.failure_cause.value_or("") + " " + (p.time_ms ? std::to_string(*p.time_ms) : "-") + " " +
             p.error.value_or("").substr(0, 160) + "\n";
    return out;
  };
  EXPECT_EQ(slurp(r1 / "output" / "best_kernel.py"), slurp(r3 / "output" / "best_kernel.py"))
      << "the same replay set, the same best kernel\none process:\n" << how_they_ended(r1)
      << "three processes:\n" << how_they_ended(r3);

  // Every device of the run took candidates, and the nodes' ones show under their names.
  std::set<int> used;
  for (const auto& p : programs_of(r3)) {
    if (p.id == "initial") continue;
    EXPECT_NE(p.status, "pending") << p.id;
    if (p.gpu_id) used.insert(*p.gpu_id);
  }
  EXPECT_EQ(used, (std::set<int>{0, 100, 101})) << "the local device and one per node";
  const auto ev = events(r3);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.front()["devices"], nlohmann::json({0, 100, 101}));
  EXPECT_FALSE(has_event(ev, "node_down"));
  // What the device work wrote on a node came back: the starting kernel's user test ran where it ran,
  // and each node ended the run: its scratch directory holds nothing of it.
  for (auto* n : {&a, &b}) {
    EXPECT_NE(slurp(n->log).find("authenticated"), std::string::npos) << slurp(n->log);
    // The node says the run is closed once every actor of it is down (its files are gone then).
    EXPECT_TRUE(wait_for([&] { return slurp(n->log).find("run closed") != std::string::npos; }, 30)) << slurp(n->log);
    EXPECT_TRUE(fs::is_empty(s.dir / (n == &a ? "nodeA_scratch" : "nodeB_scratch"))) << "the node keeps nothing";
  }
  // The nodes' evaluator logs came back into the run directory before the nodes deleted theirs.
  for (auto* n : {&a, &b}) {
    std::string safe = n->address();
    std::replace(safe.begin(), safe.end(), ':', '_');
    const auto log = r3 / "nodes" / safe / "workers" / "gpu0" / "server.log";
    EXPECT_TRUE(fs::exists(log)) << log;
  }
  EXPECT_EQ(a.stop(), 0) << "SIGTERM ends a node cleanly";
}

TEST(Nodes, ANodeKilledMidRunIsLostAndItsCandidatesRunOnTheDevicesLeft) {
  scratch s;
  const auto cfg = cpu_config(s, 2, 2);
  node_process a(s, "nodeA");
  // Slow LLM replies keep candidates in flight long enough to kill the node under one.
  const fs::path runs = s.dir / "runs";
  const pid_t run_pid = start_slow_run(s, cfg, runs, a.address());
  const bool started_on_node = wait_for([&] {
    for (const auto& e : events_so_far(runs))
      if (e.value("type", "") == "candidate_start" && e.value("gpu_id", -1) == 100) return true;
    return false;
  }, 180);
  ASSERT_TRUE(started_on_node) << slurp(s.dir / "run.log");
  a.kill9();
  int status = 0;
  ASSERT_EQ(::waitpid(run_pid, &status, 0), run_pid);
  ASSERT_TRUE(WIFEXITED(status)) << slurp(s.dir / "run.log");
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the run goes on without the node:\n" << slurp(s.dir / "run.log");

  const auto run_dir = run_dirs(runs).front();
  const auto ev = events(run_dir);
  int node_down = 0;
  for (const auto& e : ev)
    if (e.value("type", "") == "node_down") {
      ++node_down;
      EXPECT_EQ(e.value("device", ""), "nodeA/gpu0");
      EXPECT_EQ(e.value("devices_left", -1), 1);
    }
  EXPECT_EQ(node_down, 1);
  bool ran_after = false;
  bool seen_down = false;
  for (const auto& e : ev) {
    if (e.value("type", "") == "node_down") seen_down = true;
    if (seen_down && e.value("type", "") == "candidate_result") ran_after = true;
  }
  EXPECT_TRUE(ran_after) << "candidates still finish after the node is gone";
  for (const auto& p : programs_of(run_dir)) {
    EXPECT_NE(p.status, "pending") << p.id;
    EXPECT_NE(p.failure_cause.value_or(""), "node_down") << p.id << ": a device was left, so it ran there";
  }
  const auto summary = nlohmann::json::parse(slurp(run_dir / "summary.json"));
  EXPECT_TRUE(summary.value("success", false)) << summary.dump(2);
}

TEST(Nodes, AWrongSecretIsOneLineExitTwoAndNoRunDirectory) {
  scratch s;
  node_process a(s, "nodeA", "the-node-has-this-secret-123");
  auto r = run({"--strategy", "cpu", "--kernel-dir", source("examples/optimize_01_matvec"), "--run-dir",
                (s.dir / "runs").string(), "--node", a.address()},
               {{"KAGENT_NODE_SECRET", "the-run-has-another-one-456"}});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("node " + a.address() + " refused this run: authentication failed"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("the-run-has-another-one"), std::string::npos) << "the secret is never printed";
  EXPECT_EQ(r.err.find("the-node-has-this-secret"), std::string::npos);
  EXPECT_TRUE(run_dirs(s.dir / "runs").empty()) << "no run directory for a run that never started";
  EXPECT_NE(slurp(a.log).find("wrong secret"), std::string::npos) << slurp(a.log);
  EXPECT_EQ(slurp(a.log).find("the-run-has-another-one"), std::string::npos);

  // `gpus --node` lists what a node offers, to a manager that proves the secret only.
  auto listed = run({"gpus", "--node", a.address()}, {{"KAGENT_NODE_SECRET", "the-node-has-this-secret-123"}});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find("node nodeA (" + a.address() + "): cpu platform, 1 device(s)"), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("nodeA/gpu0"), std::string::npos) << listed.out;
  auto as_json = nlohmann::json::parse(
      run({"gpus", "--node", a.address(), "--json"}, {{"KAGENT_NODE_SECRET", "the-node-has-this-secret-123"}}).out);
  EXPECT_EQ(as_json["nodes"][0]["devices"][0]["device"], "nodeA/gpu0") << as_json.dump(2);
  auto refused = run({"gpus", "--node", a.address()}, {{"KAGENT_NODE_SECRET", "the-run-has-another-one-456"}});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("node " + a.address() + ": refused: authentication failed"), std::string::npos)
      << refused.err;
}

TEST(Nodes, ARunWithoutTheSecretOrWithANodeNobodyServesIsOneLine) {
  scratch s;
  const auto matvec = source("examples/optimize_01_matvec");
  // Without devices of its own, a run whose only node is not there cannot start.
  auto none = run({"--strategy", "cpu", "--kernel-dir", matvec, "--run-dir", (s.dir / "runs").string(), "--node",
                   "127.0.0.1:1", "--no-local-devices"},
                  {{"KAGENT_NODE_SECRET", secret}});
  EXPECT_EQ(none.exit_code, 2) << none.err;
  EXPECT_NE(none.err.find("node 127.0.0.1:1: cannot connect"), std::string::npos) << none.err;
  auto unset = run({"--strategy", "cpu", "--kernel-dir", matvec, "--run-dir", (s.dir / "runs").string(), "--node",
                    "127.0.0.1:1"},
                   {{"KAGENT_NODE_SECRET", ""}});
  EXPECT_EQ(unset.exit_code, 2);
  EXPECT_NE(unset.err.find("KAGENT_NODE_SECRET is not set"), std::string::npos) << unset.err;
  auto bad = run({"--strategy", "cpu", "--kernel-dir", matvec, "--node", "gpu-node-1"}, {{"KAGENT_NODE_SECRET", secret}});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--node 'gpu-node-1': no port (expected HOST:PORT"), std::string::npos) << bad.err;
  EXPECT_TRUE(run_dirs(s.dir / "runs").empty());
}

TEST(Nodes, ANodeWithoutDevicesDoesNotStartAndSaysWhy) {
  scratch s;
  // The nvidia strategy on a host whose nvidia-smi lists nothing: the node's own selection finds no
  // device, so it offers none and does not listen.
  auto r = run({"serve", "--listen", "127.0.0.1:0", "--strategy", "nvidia"},
               {{"KAGENT_NODE_SECRET", secret}, {"PATH", "/usr/bin:/bin"}, {"CUDA_VISIBLE_DEVICES", ""}});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("kagent-actors: error:"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("listening"), std::string::npos) << r.out;
}


TEST(Nodes, ANodeNotThereAtStartJoinsWhenItAnswersAndRejoinsAfterAKill) {
  scratch s;
  const auto cfg = cpu_config(s, 2, 3);
  int port = 0;
  {
    node_process probe(s, "probe");  // a free port for nodeA, which is not started yet
    port = probe.port;
    probe.stop();
  }
  const fs::path runs = s.dir / "runs";
  const pid_t run_pid = spawn_logged({"--strategy", cfg, "--kernel-dir", source("examples/optimize_01_matvec"),
                                      "--run-dir", runs.string(), "--node", "127.0.0.1:" + std::to_string(port)},
                                     {{"KAGENT_NODE_SECRET", secret}, {"KAGENT_REPLAY_DELAY_S", "2"}},
                                     s.dir / "run.log");
  ASSERT_TRUE(wait_for([&] { return count_events(events_so_far(runs), "candidate_start") > 0; }, 180))
      << "the run starts on its own device:\n" << slurp(s.dir / "run.log");
  bool said = false;
  for (const auto& e : events_so_far(runs))
    said |= e.value("type", "") == "note" && e.value("what", "").find("is not there yet") != std::string::npos;
  EXPECT_TRUE(said) << "the start says which node is missing";

  auto node = std::make_unique<node_process>(s, "nodeA", secret, port);
  auto joined_and_used = [&](int joins) {
    const auto ev = events_so_far(runs);
    std::set<int> joined_ids;
    for (const auto& e : ev)
      if (e.value("type", "") == "node_up" && e.value("device", "") == "nodeA/gpu0") joined_ids.insert(e.value("gpu_id", -1));
    if (static_cast<int>(joined_ids.size()) < joins) return false;
    const int newest = *joined_ids.rbegin();
    for (const auto& e : ev)
      if (e.value("type", "") == "candidate_start" && e.value("gpu_id", -1) == newest) return true;
    return false;
  };
  ASSERT_TRUE(wait_for([&] { return joined_and_used(1); }, 120))
      << "a late node joins and takes candidates:\n" << slurp(s.dir / "run.log") << slurp(node->log);
  node->kill9();
  ASSERT_TRUE(wait_for([&] { return count_events(events_so_far(runs), "node_down") == 1; }, 60));
  node = std::make_unique<node_process>(s, "nodeA", secret, port);
  ASSERT_TRUE(wait_for([&] { return joined_and_used(2); }, 120))
      << "a node that is back rejoins, under a new id:\n" << slurp(s.dir / "run.log") << slurp(node->log);

  int status = 0;
  ASSERT_EQ(::waitpid(run_pid, &status, 0), run_pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << slurp(s.dir / "run.log");
  const auto run_dir = run_dirs(runs).front();
  for (const auto& p : programs_of(run_dir)) EXPECT_NE(p.status, "pending") << p.id;
  // program.db names the node of every gpu_id that was a node's device.
  auto db = kagent::store::program_db::open(run_dir / "program.db", kagent::store::program_db::mode::read_only);
  const auto labels = nlohmann::json::parse(db.get_state("device_labels").value_or("{}"));
  EXPECT_EQ(labels.size(), 2u) << labels.dump();
  for (const auto& [id, label] : labels.items()) EXPECT_EQ(label, "nodeA/gpu0") << id;
}

TEST(Nodes, AManagerKilledMidRunResumesAgainstTheSameNodes) {
  scratch s;
  const auto cfg = cpu_config(s, 2, 2);
  node_process a(s, "nodeA");
  const fs::path runs = s.dir / "runs";
  const pid_t run_pid = start_slow_run(s, cfg, runs, a.address());
  // Killed while candidates are in flight, one of them on the node.
  ASSERT_TRUE(wait_for([&] {
    for (const auto& e : events_so_far(runs))
      if (e.value("type", "") == "candidate_start" && e.value("gpu_id", -1) == 100) return true;
    return false;
  }, 180)) << slurp(s.dir / "run.log");
  ::kill(run_pid, SIGKILL);
  int status = 0;
  ::waitpid(run_pid, &status, 0);
  const auto run_dir = run_dirs(runs).front();
  // The node sees the manager's link go and ends that run: its files are gone.
  ASSERT_TRUE(wait_for([&] { return slurp(a.log).find("run closed") != std::string::npos; }, 30)) << slurp(a.log);

  auto resumed = run({"--resume", run_dir.string(), "-q"}, {{"KAGENT_NODE_SECRET", secret}});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err << slurp(a.log);
  int opened = 0;
  for (size_t at = 0; (at = slurp(a.log).find("opened", at)) != std::string::npos; ++at) ++opened;
  EXPECT_EQ(opened, 2) << "the resumed run reconnected to the node its config.yaml names:\n" << slurp(a.log);
  bool on_node_after_resume = false, resumed_seen = false;
  for (const auto& e : events(run_dir)) {
    if (e.value("type", "") == "resume") resumed_seen = true;
    if (resumed_seen && e.value("type", "") == "candidate_start" && e.value("gpu_id", -1) >= 100) on_node_after_resume = true;
  }
  EXPECT_TRUE(on_node_after_resume) << "the resumed run uses the node again";
  // Its device took an id no earlier session used: program.db still names the node of every gpu_id.
  auto db = kagent::store::program_db::open(run_dir / "program.db", kagent::store::program_db::mode::read_only);
  EXPECT_EQ(nlohmann::json::parse(db.get_state("device_labels").value_or("{}")),
            nlohmann::json({{"100", "nodeA/gpu0"}, {"101", "nodeA/gpu0"}}));
  for (const auto& p : programs_of(run_dir)) EXPECT_NE(p.status, "pending") << p.id;
  EXPECT_TRUE(nlohmann::json::parse(slurp(run_dir / "summary.json")).value("success", false));
}

namespace {
/// A private CA, a certificate for a node and one for a manager signed by it, and a self-signed
/// stranger: PEM files under `dir`, made with the openssl command line.
void make_pki(const fs::path& dir) {
  fs::create_directories(dir);
  const std::string d = dir.string();
  const std::string script =
      "set -e; cd '" + d + "'; "
      "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=kagent-test-ca 2>/dev/null; "
      "for n in node manager; do "
      "openssl req -newkey rsa:2048 -nodes -keyout $n.key -out $n.csr -subj /CN=$n 2>/dev/null; "
      "openssl x509 -req -in $n.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out $n.pem -days 2 2>/dev/null; done; "
      "openssl req -x509 -newkey rsa:2048 -nodes -keyout rogue.key -out rogue.pem -days 2 -subj /CN=rogue 2>/dev/null";
  std::ofstream(dir / "make.sh") << script << "\n";
  ASSERT_EQ(std::system(("bash '" + (dir / "make.sh").string() + "'").c_str()), 0) << "openssl could not make the test PKI";
  ASSERT_TRUE(fs::exists(dir / "node.pem") && fs::exists(dir / "manager.key") && fs::exists(dir / "rogue.pem"));
}

std::string with_tls(const scratch& s, const std::string& file, const fs::path& pki, const std::string& who,
                     const std::string& ca = "ca.pem") {
  auto cfg = slurp(source("configs/cpu.yaml"));
  cfg.replace(cfg.find("max_rounds: 3"), 13, "max_rounds: 1");
  cfg += "node_tls:\n  certificate: " + (pki / (who + ".pem")).string() + "\n  key: " + (pki / (who + ".key")).string() +
         "\n  cafile: " + (pki / ca).string() + "\n";
  return s.write(file, cfg);
}
} // namespace

TEST(Nodes, WithCertificatesOnBothSidesTheLinkIsMutualTlsAndAStrangerIsRefused) {
  scratch s;
  const auto pki = s.dir / "pki";
  make_pki(pki);
  if (HasFatalFailure()) return;
  node_process a(s, "nodeA", secret, 0, with_tls(s, "node.yaml", pki, "node"));
  const auto matvec = source("examples/optimize_01_matvec");
  auto ok = run({"--strategy", with_tls(s, "manager.yaml", pki, "manager"), "--kernel-dir", matvec, "--run-dir",
                 (s.dir / "ok").string(), "--node", a.address(), "--no-local-devices", "-q"},
                {{"KAGENT_NODE_SECRET", secret}});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err << slurp(a.log);
  // Without a certificate, or with one the node's CA did not sign, the TLS handshake fails: the node
  // is never reached, whatever secret the run knows.
  const auto with = slurp(with_tls(s, "x.yaml", pki, "manager"));
  const auto plain = s.write("plain.yaml", with.substr(0, with.find("node_tls:")));
  auto none = run({"--strategy", plain, "--kernel-dir", matvec, "--run-dir", (s.dir / "none").string(), "--node",
                   a.address(), "--no-local-devices"},
                  {{"KAGENT_NODE_SECRET", secret}});
  EXPECT_EQ(none.exit_code, 2) << none.err;
  EXPECT_NE(none.err.find("cannot connect"), std::string::npos) << none.err;
  auto rogue = run({"--strategy", with_tls(s, "rogue.yaml", pki, "rogue", "rogue.pem"), "--kernel-dir", matvec,
                    "--run-dir", (s.dir / "rogue").string(), "--node", a.address(), "--no-local-devices"},
                   {{"KAGENT_NODE_SECRET", secret}});
  EXPECT_EQ(rogue.exit_code, 2) << rogue.err;
  EXPECT_NE(rogue.err.find("cannot connect"), std::string::npos) << rogue.err;
  EXPECT_EQ(slurp(a.log).find("authenticated", slurp(a.log).find("authenticated") + 1), std::string::npos)
      << "only the certified manager got as far as the secret:\n" << slurp(a.log);
  // A key that does not load is one line at start, not an abort at the first connection.
  std::ofstream(pki / "broken.key") << "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n";
  auto cfg = slurp(with_tls(s, "y.yaml", pki, "manager"));
  cfg.replace(cfg.find((pki / "manager.key").string()), (pki / "manager.key").string().size(), (pki / "broken.key").string());
  auto broken = run({"serve", "--strategy", s.write("broken.yaml", cfg), "--listen", "127.0.0.1:0"},
                    {{"KAGENT_NODE_SECRET", secret}});
  EXPECT_EQ(broken.exit_code, 2) << broken.err;
  EXPECT_NE(broken.err.find("the private key does not load"), std::string::npos) << broken.err;
}
