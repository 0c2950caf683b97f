#pragma once
// A `kagent-actors serve` process on loopback for the many-nodes tests.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/e2e/e2e_util.hpp"

namespace e2e {

inline const std::string secret = "loopback-secret-0123456789";

/// A `kagent-actors serve` on loopback, on a free port it prints at start.
struct node_process {
  pid_t pid = -1;
  fs::path log;
  int port = 0;
  node_process(const scratch& s, const std::string& name, const std::string& node_secret = secret, int on_port = 0,
               const std::string& strategy = "cpu") {
    log = s.dir / (name + ".log");
    pid = spawn_logged({"serve", "--listen", "127.0.0.1:" + std::to_string(on_port), "--strategy", strategy, "--name", name,
                        "--scratch",
                        (s.dir / (name + "_scratch")).string()},
                       {{"KAGENT_NODE_SECRET", node_secret}}, log);
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    const std::regex listening{R"(listening on 127\.0\.0\.1:(\d+))"};
    while (std::chrono::steady_clock::now() < end && port == 0) {
      std::smatch m;
      const auto text = slurp(log);
      if (std::regex_search(text, m, listening)) port = std::stoi(m[1]);
      else std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_NE(port, 0) << "the node never listened:\n" << slurp(log);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
  void kill9() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
  }
  /// SIGTERM and wait: its exit status.
  int stop() {
    if (pid <= 0) return -1;
    ::kill(pid, SIGTERM);
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
    return status;
  }
  ~node_process() { kill9(); }
};


} // namespace e2e
