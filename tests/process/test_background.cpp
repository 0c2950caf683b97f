// background_process: the process a standby (ncu, test.py) runs on a thread of its own.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "platform/common/stop.hpp"
#include "platform/process/background.hpp"

using namespace kagent;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {
process_spec sh(const std::string& script, std::chrono::milliseconds timeout = 60s) {
  process_spec s;
  s.argv = {"/bin/sh", "-c", script};
  s.timeout = timeout;
  return s;
}

bool pid_alive(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  if (!f) return false;
  std::string line;
  std::getline(f, line);
  auto rp = line.rfind(')');
  return rp != std::string::npos && rp + 2 < line.size() && line[rp + 2] != 'Z';
}

/// A pid file under a fresh directory, and the pid written there once the shell has started.
struct pid_file {
  fs::path path = fs::temp_directory_path() / ("kagent_bg_" + std::to_string(::getpid()) + "_" +
                                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
  ~pid_file() { fs::remove(path); }
  pid_t wait_for_pid() const {
    for (int i = 0; i < 500; ++i) {
      std::ifstream f(path);
      pid_t pid = 0;
      if (f >> pid && pid > 0) return pid;
      std::this_thread::sleep_for(10ms);
    }
    return 0;
  }
};

bool gone_within_2s(pid_t pid) {
  for (int i = 0; i < 100 && pid_alive(pid); ++i) std::this_thread::sleep_for(20ms);
  return !pid_alive(pid);
}
} // namespace

TEST(BackgroundProcess, AProcessThatEndsByItselfGivesItsResult) {
  background_process p(sh("echo ready; exit 4"), "bg test ends");
  EXPECT_EQ(p.wait(10s), background_process::waited::ended);
  EXPECT_TRUE(p.ended());
  auto r = p.finish();
  EXPECT_TRUE(r.started);
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_EQ(r.out, "ready\n");
}

TEST(BackgroundProcess, AWaitThatRunsOutLeavesItRunningAndFinishKillsIt) {
  pid_file pf;
  background_process p(sh("echo $$ > " + pf.path.string() + "; exec sleep 30"), "bg test limit");
  const pid_t pid = pf.wait_for_pid();
  ASSERT_GT(pid, 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(p.wait(300ms), background_process::waited::limit);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 300ms);
  EXPECT_FALSE(p.ended());
  EXPECT_TRUE(pid_alive(pid)) << "a wait must not kill it";
  auto r = p.finish();
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(gone_within_2s(pid));
}

TEST(BackgroundProcess, GiveUpEndsTheWaitEarly) {
  background_process p(sh("exec sleep 30"), "bg test give up");
  int asked = 0;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(p.wait(20s, [&] { return ++asked >= 3; }), background_process::waited::gave_up);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  EXPECT_EQ(asked, 3);
  EXPECT_FALSE(p.finish().ok());
}

TEST(BackgroundProcess, DroppingItKillsARunningProcess) {
  pid_file pf;
  pid_t pid = 0;
  const auto t0 = std::chrono::steady_clock::now();
  {
    background_process p(sh("echo $$ > " + pf.path.string() + "; exec sleep 30"), "bg test drop");
    pid = pf.wait_for_pid();
    ASSERT_GT(pid, 0);
  }
  // Killed, not waited for: a destructor that only joined would return when the sleep ends, 30 s on.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
  EXPECT_TRUE(gone_within_2s(pid));
}

TEST(BackgroundProcess, CancellingItsKeyKillsIt) {
  // What the run does to a candidate's work: cancel_work(key) reaches the process on its thread.
  pid_file pf;
  background_process p(sh("echo $$ > " + pf.path.string() + "; exec sleep 30"), "bg test cancel key");
  const pid_t pid = pf.wait_for_pid();
  ASSERT_GT(pid, 0);
  cancel_work("bg test cancel key");
  EXPECT_EQ(p.wait(10s), background_process::waited::ended);
  auto r = p.finish();
  EXPECT_TRUE(r.stopped || r.term_signal != 0) << r.describe();
  EXPECT_TRUE(gone_within_2s(pid));
}

TEST(BackgroundProcess, AProgramThatCannotRunIsAResultNotAThrow) {
  process_spec s;
  s.argv = {"/nonexistent/kagent-no-such-program"};
  s.timeout = 5s;
  background_process p(std::move(s), "bg test missing");
  EXPECT_EQ(p.wait(5s), background_process::waited::ended);
  auto r = p.finish();
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(!r.started || r.exit_code == 127) << r.describe();
}
