#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "platform/common/stop.hpp"
#include "platform/process/background.hpp"
#include "platform/process/runner.hpp"

using namespace kagent;
using namespace std::chrono_literals;

namespace {
process_spec sh(const std::string& script, std::chrono::milliseconds timeout = 10s) {
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

/// The pid a test's shell wrote to `pidfile`; 0 when there is none.
pid_t pid_in(const std::string& pidfile) {
  std::ifstream f(pidfile);
  pid_t pid = 0;
  f >> pid;
  return pid;
}

/// Waits up to 2 s for `pid` to end; true if it is still alive then.
bool still_alive_after_2s(pid_t pid) {
  for (int i = 0; i < 100 && pid_alive(pid); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return pid_alive(pid);
}
} // namespace

TEST(Process, CapturesStdoutStderrAndExitCode) {
  auto r = run_process(sh("echo out; echo err >&2; exit 3"));
  EXPECT_TRUE(r.started);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.describe(), "exit 3");
}

TEST(Process, ArgvIsPassedVerbatim) {
  process_spec s;
  s.argv = {"/bin/echo", "a b", "$HOME", "'q'"};
  auto r = run_process(s);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.out, "a b $HOME 'q'\n");
}

TEST(Process, SignalIsToldApartFromExitCode) {
  auto r = run_process(sh("kill -SEGV $$"));
  EXPECT_EQ(r.term_signal, SIGSEGV);
  EXPECT_NE(r.describe().find("SIGSEGV"), std::string::npos);
  auto r9 = run_process(sh("exit 9"));
  EXPECT_EQ(r9.term_signal, 0);
  EXPECT_EQ(r9.exit_code, 9);
}

TEST(Process, TimeoutKillsTheWholeGroupIncludingGrandchildren) {
  auto dir = std::filesystem::temp_directory_path() / ("kagent_proc_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto pidfile = (dir / "gc.pid").string();
  auto r = run_process(sh("sleep 300 & echo $! > " + pidfile + "; wait", 700ms));
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.ok());
  const pid_t gc = pid_in(pidfile);
  ASSERT_GT(gc, 0);
  EXPECT_FALSE(still_alive_after_2s(gc)) << "grandchild " << gc << " survived the timeout";
  std::filesystem::remove_all(dir);
}

TEST(Stop, EndsARunningGroupWithItsGrandchildrenAndStartsNothingNew) {
  // A 300 s child with a grandchild, under a 60 s deadline: the stop (Ctrl-C of the run) ends both
  // long before either deadline, says so, and no child starts afterwards.
  clear_stop_for_tests();
  auto dir = std::filesystem::temp_directory_path() / ("kagent_stop_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto pidfile = (dir / "gc.pid").string();
  std::thread stopper([&] {
    for (int i = 0; i < 500 && !std::filesystem::exists(pidfile); ++i) std::this_thread::sleep_for(10ms);
    std::this_thread::sleep_for(50ms);
    request_stop();
  });
  auto r = run_process(sh("sleep 300 & echo $! > " + pidfile + "; wait", 60s));
  stopper.join();
  EXPECT_TRUE(r.stopped);
  EXPECT_FALSE(r.timed_out);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.describe(), "stopped: the run was interrupted (process group killed)");
  const pid_t gc = pid_in(pidfile);
  ASSERT_GT(gc, 0);
  EXPECT_FALSE(still_alive_after_2s(gc)) << "grandchild " << gc << " survived the stop";
  auto next = run_process(sh("echo should-not-run"));
  EXPECT_FALSE(next.started);
  EXPECT_NE(next.error.find("the run is stopping"), std::string::npos) << next.error;
  EXPECT_EQ(next.out, "");
  clear_stop_for_tests();
  EXPECT_TRUE(run_process(sh("true")).ok());
  std::filesystem::remove_all(dir);
}

// The slow fake endpoint's and the noop device's wait: it runs out when nothing stops it, and gives up
// (false) once the run stops or the calling thread's candidate is cancelled.
TEST(Stop, AWaitGivesUpWhenTheRunStopsOrTheCandidateIsCancelled) {
  clear_stop_for_tests();
  EXPECT_TRUE(wait_unless_giving_up(0.05));
  request_stop();
  EXPECT_FALSE(wait_unless_giving_up(30));
  clear_stop_for_tests();
  {
    work_scope scope("wait_test_candidate");
    cancel_work("wait_test_candidate");
    EXPECT_FALSE(wait_unless_giving_up(30));
  }
  clear_cancelled_for_tests();
  EXPECT_TRUE(wait_unless_giving_up(0.01));
}

TEST(Stop, TrackedGroupsAreSignalled) {
  // What a second Ctrl-C uses from its signal handler: every live child group gets the signal.
  clear_stop_for_tests();
  pid_t leader = ::fork();
  if (leader == 0) {
    ::setpgid(0, 0);
    ::pause();
    ::_exit(0);
  }
  ::setpgid(leader, leader);
  track_child_group(leader);
  signal_child_groups(SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(leader, &status, 0), leader);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  untrack_child_group(leader);
}

TEST(Process, ExitedChildWithGrandchildHoldingThePipeDoesNotWaitForTheDeadline) {
  auto r = run_process(sh("sleep 300 & echo started", 60s));
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "started\n");
  EXPECT_LT(r.wall_s, 30.0);  // ended by the drain rule, not by the 60 s deadline
}

TEST(Process, EnvironmentReplacesAndCwdApplies) {
  process_spec s = sh("echo \"$ONLY|$HOME|$(pwd)\"");
  s.env = env_map{{"ONLY", "1"}, {"PATH", "/usr/bin:/bin"}};
  s.cwd = "/tmp";
  auto r = run_process(s);
  EXPECT_EQ(r.out, "1||/tmp\n");
}

TEST(Process, MissingProgramAndMissingCwdAreSpawnFailures) {
  process_spec s;
  s.argv = {"definitely-not-a-program-kagent"};
  auto r = run_process(s);
  EXPECT_FALSE(r.started);
  EXPECT_NE(r.error.find("No such file"), std::string::npos);
  process_spec c = sh("true");
  c.cwd = "/nonexistent/dir";
  auto rc = run_process(c);
  EXPECT_FALSE(rc.started);
  EXPECT_NE(rc.error.find("/nonexistent/dir"), std::string::npos);
}

TEST(Process, DropPrivilegesLeavesTheChildNoCapabilityEvenAfterExec) {
  // The status lines of a shell run as this test is run (root here), with and without the drop.
  auto status = [](bool drop) {
    auto spec = sh("grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status");
    spec.drop_privileges = drop;
    return run_process(spec);
  };
  const auto dropped = status(true);
  ASSERT_TRUE(dropped.ok()) << dropped.describe() << dropped.err;
  for (const char* line : {"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
                           "CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1"})
    EXPECT_NE(dropped.out.find(line), std::string::npos) << line << " in\n" << dropped.out;
  // Without the drop the child keeps what this process has (all of it, when the suite runs as root).
  std::ifstream own("/proc/self/status");
  std::string own_eff;
  for (std::string line; std::getline(own, line);)
    if (line.rfind("CapEff:", 0) == 0) own_eff = line;
  const auto kept = status(false);
  ASSERT_TRUE(kept.ok()) << kept.describe();
  EXPECT_NE(kept.out.find(own_eff), std::string::npos) << own_eff << " in\n" << kept.out;
}

TEST(Process, StdinIsDeliveredAndLargeOutputIsTailed) {
  process_spec s = sh("cat; head -c 3000000 /dev/zero | tr '\\0' x");
  s.stdin_data = "hello\n";
  s.max_output_bytes = 1000;
  auto r = run_process(s);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.out.size(), 1000u);
  EXPECT_EQ(r.out.back(), 'x');
}

TEST(Env, ScrubRemovesSecretsByPattern) {
  env_map e{{"ANTHROPIC_API_KEY", "k"}, {"GITHUB_TOKEN", "t"}, {"MY_SECRET_X", "s"}, {"PATH", "/bin"}};
  auto s = scrub_env(e, default_secret_patterns());
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(s.count("PATH"), 1u);
  EXPECT_TRUE(glob_match("*_API_KEY", "OPENAI_API_KEY"));
  EXPECT_FALSE(glob_match("*_API_KEY", "OPENAI_API_KEYS"));
}

TEST(CancelWork, EndsOnlyTheCancelledCandidatesChildrenAndStartsNothingNewForIt) {
  // Two candidates' children run side by side, each under its candidate's work scope; the first
  // candidate times out (cancel_work): its child and grandchild are killed long before their
  // deadline and nothing new starts for it, while the other candidate and the run go on.
  clear_stop_for_tests();
  clear_cancelled_for_tests();
  auto dir = std::filesystem::temp_directory_path() / ("kagent_cancel_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto pidfile = (dir / "gc.pid").string();
  process_result other;
  std::thread neighbour([&] {
    work_scope scope("r1_c1");
    other = run_process(sh("sleep 1; echo neighbour-done", 60s));
  });
  std::thread canceller([&] {
    for (int i = 0; i < 500 && !std::filesystem::exists(pidfile); ++i) std::this_thread::sleep_for(10ms);
    std::this_thread::sleep_for(50ms);
    cancel_work("r1_c0");
  });
  process_result r, next;
  {
    work_scope scope("r1_c0");
    r = run_process(sh("sleep 300 & echo $! > " + pidfile + "; wait", 60s));
    next = run_process(sh("echo should-not-run"));
  }
  canceller.join();
  neighbour.join();
  EXPECT_TRUE(r.stopped);
  EXPECT_FALSE(r.timed_out);
  const pid_t gc = pid_in(pidfile);
  ASSERT_GT(gc, 0);
  EXPECT_FALSE(still_alive_after_2s(gc)) << "grandchild " << gc << " survived its candidate's cancel";
  EXPECT_FALSE(next.started);
  EXPECT_NE(next.error.find("cancelled"), std::string::npos) << next.error;
  EXPECT_TRUE(other.ok()) << other.describe();
  EXPECT_NE(other.out.find("neighbour-done"), std::string::npos);
  EXPECT_TRUE(work_cancelled("r1_c0"));
  EXPECT_FALSE(work_cancelled("r1_c1"));
  EXPECT_FALSE(should_give_up());  // outside any scope: the run itself goes on
  EXPECT_TRUE(run_process(sh("true")).ok());
  clear_cancelled_for_tests();
  std::filesystem::remove_all(dir);
}

// ---- background_process: the process a standby (ncu, test.py) runs on a thread of its own ----------

namespace {
/// A pid file path of its own for the current test.
std::string scratch_pidfile() {
  return (std::filesystem::temp_directory_path() /
          ("kagent_bg_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name()))
      .string();
}
/// Removes a file when the test ends, however it ends.
struct removed_at_end {
  std::string path;
  ~removed_at_end() { std::filesystem::remove(path); }
};
/// The pid a test's shell wrote to `pidfile`, waiting up to 5 s for it; 0 when none came.
pid_t wait_for_pid(const std::string& pidfile) {
  for (int i = 0; i < 500; ++i) {
    if (pid_t pid = pid_in(pidfile); pid > 0) return pid;
    std::this_thread::sleep_for(10ms);
  }
  return 0;
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
  const std::string pidfile = scratch_pidfile();
  removed_at_end cleanup{pidfile};
  background_process p(sh("echo $$ > " + pidfile + "; exec sleep 30", 60s), "bg test limit");
  const pid_t pid = wait_for_pid(pidfile);
  ASSERT_GT(pid, 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(p.wait(300ms), background_process::waited::limit);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 300ms);
  EXPECT_FALSE(p.ended());
  EXPECT_TRUE(pid_alive(pid)) << "a wait must not kill it";
  auto r = p.finish();
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(!still_alive_after_2s(pid));
}

TEST(BackgroundProcess, GiveUpEndsTheWaitEarly) {
  background_process p(sh("exec sleep 30", 60s), "bg test give up");
  int asked = 0;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(p.wait(20s, [&] { return ++asked >= 3; }), background_process::waited::gave_up);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  EXPECT_EQ(asked, 3);
  EXPECT_FALSE(p.finish().ok());
}

TEST(BackgroundProcess, DroppingItKillsARunningProcess) {
  const std::string pidfile = scratch_pidfile();
  removed_at_end cleanup{pidfile};
  pid_t pid = 0;
  const auto t0 = std::chrono::steady_clock::now();
  {
    background_process p(sh("echo $$ > " + pidfile + "; exec sleep 30", 60s), "bg test drop");
    pid = wait_for_pid(pidfile);
    ASSERT_GT(pid, 0);
  }
  // Killed, not waited for: a destructor that only joined would return when the sleep ends, 30 s on.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
  EXPECT_TRUE(!still_alive_after_2s(pid));
}

TEST(BackgroundProcess, CancellingItsKeyKillsIt) {
  // What the run does to a candidate's work: cancel_work(key) reaches the process on its thread.
  const std::string pidfile = scratch_pidfile();
  removed_at_end cleanup{pidfile};
  background_process p(sh("echo $$ > " + pidfile + "; exec sleep 30", 60s), "bg test cancel key");
  const pid_t pid = wait_for_pid(pidfile);
  ASSERT_GT(pid, 0);
  cancel_work("bg test cancel key");
  EXPECT_EQ(p.wait(10s), background_process::waited::ended);
  auto r = p.finish();
  EXPECT_TRUE(r.stopped || r.term_signal != 0) << r.describe();
  EXPECT_TRUE(!still_alive_after_2s(pid));
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
