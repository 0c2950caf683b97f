// platform/process/proc_tree.hpp: /proc/PID/stat parsing and the tree below a real process.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "platform/process/proc_tree.hpp"

using namespace kagent;

TEST(ProcTree, StatLinesWithSpacesAndParenthesesInTheName) {
  proc_entry p;
  ASSERT_TRUE(parse_proc_stat("4242 (python3) S 17 4242 4242 0 -1 4194560 ...", p));
  EXPECT_EQ(p.pid, 4242);
  EXPECT_EQ(p.ppid, 17);
  EXPECT_EQ(p.comm, "python3");
  // A process may name itself anything, ") R 1" included: the name ends at the last ')'.
  ASSERT_TRUE(parse_proc_stat("99 (a) R 1 (b)) S 5 99 99 0", p));
  EXPECT_EQ(p.comm, "a) R 1 (b)");
  EXPECT_EQ(p.ppid, 5);
  EXPECT_FALSE(parse_proc_stat("", p));
  EXPECT_FALSE(parse_proc_stat("x (y) S 1", p));
  EXPECT_FALSE(parse_proc_stat("12 (y)", p));
}

TEST(ProcTree, NamespacePidsFromTheStatusLine) {
  EXPECT_EQ(parse_nspid("NSpid:\t4242\t7"), (std::vector<int>{4242, 7}));
  EXPECT_EQ(parse_nspid("NSpid:\t12"), (std::vector<int>{12}));
  EXPECT_TRUE(parse_nspid("NStgid:\t12").empty());
  EXPECT_TRUE(parse_nspid("NSpid:\t12\tx").size() <= 1u);
  // Our own: one namespace here, our pid.
  const auto self = process_tree(::getpid());
  ASSERT_FALSE(self.empty());
  ASSERT_FALSE(self.front().nspid.empty());
  EXPECT_EQ(self.front().nspid.front(), ::getpid());
}

TEST(ProcTree, TheTreeBelowARealProcessWithItsExecutablesAndArguments) {
  // sh -> (sleep, and a subshell -> sleep): three levels.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", "sleep 30 & (sleep 31; true) & wait", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::vector<proc_entry> tree;
  for (int i = 0; i < 200; ++i) {  // until both sleeps run
    tree = process_tree(pid);
    if (std::count_if(tree.begin(), tree.end(), [](const proc_entry& p) { return p.comm == "sleep"; }) == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GE(tree.size(), 4u);
  EXPECT_EQ(tree.front().pid, pid);
  std::vector<std::string> args;
  for (const auto& p : tree) {
    if (p.comm != "sleep") continue;
    ASSERT_EQ(p.cmdline.size(), 2u);
    args.push_back(p.cmdline[1]);
    EXPECT_NE(p.exe.find("sleep"), std::string::npos) << p.exe;
  }
  std::sort(args.begin(), args.end());
  EXPECT_EQ(args, (std::vector<std::string>{"30", "31"}));
  // Every entry's parent is in the tree (the root's is ours).
  for (const auto& p : tree) {
    if (p.pid == pid) {
      EXPECT_EQ(p.ppid, ::getpid());
      continue;
    }
    EXPECT_TRUE(std::any_of(tree.begin(), tree.end(), [&](const proc_entry& q) { return q.pid == p.ppid; }));
  }
  for (const auto& p : tree) ::kill(p.pid, SIGKILL);
  int st = 0;
  ::waitpid(pid, &st, 0);
  EXPECT_TRUE(process_tree(pid).empty()) << "a reaped process has no tree";
  EXPECT_TRUE(process_tree(0).empty());
}
