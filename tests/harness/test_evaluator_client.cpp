// evaluator_client against a stdlib-only stand-in server (python3, no torch): process handling,
// timeouts, crashes, protocol errors, restarts with problem replay, and nothing left behind.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "platform/process/evaluator_client.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using kagent::evaluator_client;
using kagent::evaluator_failure;
using kagent::evaluator_options;

namespace {

// Speaks the evaluator protocol on fd 3; each op exercises one way a real server can behave.
constexpr const char* fake_server = R"PY(
import json, os, signal, subprocess, sys, time
sock = os.fdopen(3, "rb+", buffering=0)
print("noise on stdout that must not reach the protocol", flush=True)
buf = b""
while True:
    while b"\n" not in buf:
        chunk = sock.read(65536)
        if not chunk:
            sys.exit(0)
        buf += chunk
    line, buf = buf.split(b"\n", 1)
    req = json.loads(line)
    op = req["op"]
    reply = {"id": req.get("id"), "op": op, "ok": True, "poisoned": False, "result": {}}
    if op == "ping":
        reply["result"] = {"pong": True, "pid": os.getpid(), "cwd": os.getcwd(),
                           "pinned": os.environ.get("PINNED_DEVICE"), "secret": os.environ.get("SECRET")}
    elif op == "load_problem":
        with open(os.path.join(req["count_dir"], "loads"), "a") as f:
            f.write(req["problem"] + "\n")
    elif op == "size":
        reply["result"] = {"bytes": len(req["payload"]), "echo": req["payload"][-16:]}
    elif op == "grandchild":
        reply["result"] = {"pid": subprocess.Popen(["sleep", "300"]).pid}
    elif op == "hang":
        time.sleep(300)
    elif op == "segfault":
        print("about to crash", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)
    elif op == "exit":
        sys.exit(5)
    elif op == "garbage":
        sock.write(b"this is not json\n")
        continue
    elif op == "wrong_id":
        reply["id"] = -12345
    elif op == "poison":
        reply.update(ok=False, poisoned=True, kind="poisoned", error="CUDA error: an illegal memory access")
        sock.write((json.dumps(reply) + "\n").encode())
        sys.exit(3)
    elif op == "shutdown":
        sock.write((json.dumps(reply) + "\n").encode())
        sys.exit(0)
    sock.write((json.dumps(reply) + "\n").encode())
)PY";

// Live (non-zombie) processes whose process group is `pgid`, read from /proc.
std::vector<pid_t> live_members(pid_t pgid) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), {});
    auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    long ppid = 0, pgrp = 0;
    rest >> state >> ppid >> pgrp;
    if (pgrp == pgid && state != 'Z' && state != 'X') out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

bool alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return false;
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  auto close = stat.rfind(')');
  return close != std::string::npos && stat.size() > close + 2 && stat[close + 2] != 'Z';
}

// Zombie orphans are reaped by init at its own pace; "gone" means no live member within a few seconds.
bool group_gone(pid_t pgid) {
  for (int i = 0; i < 200; ++i) {
    if (live_members(pgid).empty()) return true;
    std::this_thread::sleep_for(25ms);
  }
  return false;
}

class EvaluatorClient : public ::testing::Test {
protected:
  void SetUp() override {
    python_ = kagent::find_on_path("python3", kagent::env_get(kagent::current_environment(), "PATH").value_or(""));
    if (python_.empty()) GTEST_SKIP() << "python3 not on PATH";
    char tmpl[] = "/tmp/kagent-evaluator-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ / "fake_server.py") << fake_server;
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  evaluator_options options() {
    evaluator_options o;
    o.python = "python3";
    o.script = (dir_ / "fake_server.py").string();
    o.env = {{"PATH", kagent::env_get(kagent::current_environment(), "PATH").value_or("/usr/bin:/bin")},
             {"PINNED_DEVICE", "3"}};
    o.cwd = dir_.string();
    o.log_dir = (dir_ / "log").string();
    return o;
  }
  int loads() {
    std::ifstream in(dir_ / "loads");
    int n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  }
  nlohmann::json load_request() {
    return {{"op", "load_problem"}, {"problem", "p.py"}, {"count_dir", dir_.string()}};
  }

  std::string python_;
  fs::path dir_;
};

TEST_F(EvaluatorClient, PingUsesTheGivenEnvironmentAndDirectoryOnly) {
  evaluator_client c(options());
  auto r = c.ping();
  ASSERT_EQ(r.failure, evaluator_failure::none) << r.message;
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.body["result"]["pinned"], "3");
  EXPECT_TRUE(r.body["result"]["secret"].is_null());  // nothing is added to the given environment
  EXPECT_EQ(fs::canonical(r.body["result"]["cwd"].get<std::string>()), fs::canonical(dir_));
  EXPECT_EQ(r.body["result"]["pid"].get<int>(), c.pid());
  EXPECT_EQ(::getpgid(c.pid()), c.pid());  // leader of its own process group
  EXPECT_TRUE(c.ping().ok());
  EXPECT_EQ(c.starts(), 1);
}

TEST_F(EvaluatorClient, TimeoutKillsTheWholeGroupAndTheNextRequestRestarts) {
  evaluator_client c(options());
  auto g = c.request({{"op", "grandchild"}}, 10s);
  ASSERT_TRUE(g.ok()) << g.message;
  pid_t grandchild = g.body["result"]["pid"].get<int>();
  pid_t server = c.pid();
  ASSERT_TRUE(alive(grandchild));

  auto r = c.request({{"op", "hang"}}, 300ms);
  EXPECT_EQ(r.failure, evaluator_failure::timeout);
  EXPECT_NE(r.message.find("timed out"), std::string::npos) << r.message;
  EXPECT_FALSE(c.running());
  EXPECT_TRUE(group_gone(server));
  EXPECT_FALSE(alive(grandchild));

  auto p = c.ping();
  ASSERT_TRUE(p.ok()) << p.message;
  EXPECT_EQ(c.starts(), 2);
  EXPECT_NE(c.pid(), server);
}

TEST_F(EvaluatorClient, CrashIsReportedWithItsSignalAndStderr) {
  evaluator_client c(options());
  ASSERT_TRUE(c.ping().ok());
  auto r = c.request({{"op", "segfault"}}, 10s);
  EXPECT_EQ(r.failure, evaluator_failure::crashed);
  EXPECT_EQ(r.term_signal, SIGSEGV);
  EXPECT_NE(r.message.find("SIGSEGV"), std::string::npos) << r.message;
  EXPECT_NE(r.stderr_tail.find("about to crash"), std::string::npos) << r.stderr_tail;
  EXPECT_FALSE(c.running());
  EXPECT_TRUE(c.ping().ok());
  EXPECT_EQ(c.starts(), 2);
}

TEST_F(EvaluatorClient, ExitWithoutReplyIsACrashWithItsStatus) {
  evaluator_client c(options());
  auto r = c.request({{"op", "exit"}}, 10s);
  EXPECT_EQ(r.failure, evaluator_failure::crashed);
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_NE(r.message.find("exited with status 5"), std::string::npos) << r.message;
  EXPECT_TRUE(c.ping().ok());
}

TEST_F(EvaluatorClient, RestartReplaysTheLastLoadedProblem) {
  evaluator_client c(options());
  ASSERT_TRUE(c.request(load_request(), 10s).ok());
  EXPECT_EQ(loads(), 1);
  EXPECT_EQ(c.request({{"op", "segfault"}}, 10s).failure, evaluator_failure::crashed);
  auto p = c.ping();
  ASSERT_TRUE(p.ok()) << p.message;
  EXPECT_EQ(loads(), 2);  // the fresh server got the problem before the ping
  // A new load_problem after a crash is not preceded by a replay of the old one.
  EXPECT_EQ(c.request({{"op", "exit"}}, 10s).failure, evaluator_failure::crashed);
  ASSERT_TRUE(c.request(load_request(), 10s).ok());
  EXPECT_EQ(loads(), 3);
}

TEST_F(EvaluatorClient, GarbledOrMismatchedRepliesAreProtocolErrors) {
  evaluator_client c(options());
  auto r = c.request({{"op", "garbage"}}, 10s);
  EXPECT_EQ(r.failure, evaluator_failure::protocol_error);
  EXPECT_NE(r.message.find("not a JSON object"), std::string::npos) << r.message;
  EXPECT_TRUE(c.ping().ok());
  auto w = c.request({{"op", "wrong_id"}}, 10s);
  EXPECT_EQ(w.failure, evaluator_failure::protocol_error);
  EXPECT_TRUE(c.ping().ok());
  EXPECT_EQ(c.starts(), 3);
  EXPECT_EQ(c.request({{"no_op", 1}}, 1s).failure, evaluator_failure::protocol_error);
}

TEST_F(EvaluatorClient, PoisonedServerIsReapedAndReplaced) {
  evaluator_client c(options());
  ASSERT_TRUE(c.ping().ok());
  pid_t first = c.pid();
  auto r = c.request({{"op", "poison"}}, 10s);
  EXPECT_EQ(r.failure, evaluator_failure::poisoned);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.message.find("illegal memory access"), std::string::npos) << r.message;
  EXPECT_EQ(r.body["kind"], "poisoned");
  EXPECT_FALSE(c.running());
  EXPECT_TRUE(group_gone(first));
  EXPECT_TRUE(c.ping().ok());
}

TEST_F(EvaluatorClient, LargeRequestsAndRepliesCrossTheSocketWhole) {
  evaluator_client c(options());
  std::string payload(3 << 20, 'x');
  payload += "end-of-payload-1";
  auto r = c.request({{"op", "size"}, {"payload", payload}}, 30s);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.body["result"]["bytes"].get<size_t>(), payload.size());
  EXPECT_EQ(r.body["result"]["echo"], "end-of-payload-1");
}

TEST_F(EvaluatorClient, MissingInterpreterIsASpawnFailure) {
  auto o = options();
  o.python = "/nonexistent/python3";
  evaluator_client c(o);
  auto r = c.ping();
  EXPECT_EQ(r.failure, evaluator_failure::spawn_failed);
  EXPECT_NE(r.message.find("No such file or directory"), std::string::npos) << r.message;
  o.python = "no-such-python-anywhere";
  evaluator_client c2(o);
  EXPECT_NE(c2.ping().message.find("not found on the child's PATH"), std::string::npos);
}

TEST_F(EvaluatorClient, DestructionLeavesNoProcessBehind) {
  pid_t server = 0, grandchild = 0;
  {
    evaluator_client c(options());
    auto g = c.request({{"op", "grandchild"}}, 10s);
    ASSERT_TRUE(g.ok()) << g.message;
    grandchild = g.body["result"]["pid"].get<int>();
    server = c.pid();
    ASSERT_GE(live_members(server).size(), 2u);
  }
  EXPECT_TRUE(group_gone(server));
  EXPECT_FALSE(alive(grandchild));
}

TEST_F(EvaluatorClient, OwnTemporaryLogDirectoryIsRemoved) {
  auto o = options();
  o.log_dir.clear();
  std::string log_dir;
  {
    evaluator_client c(o);
    ASSERT_TRUE(c.ping().ok());
    log_dir = c.log_dir();
    EXPECT_TRUE(fs::exists(fs::path(log_dir) / "server.log"));
  }
  EXPECT_FALSE(fs::exists(log_dir));
}

} // namespace
