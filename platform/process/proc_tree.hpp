#pragma once
// The processes below one process, as /proc shows them to this one (host PIDs: a sandbox's own PID
// namespace is a subtree here). Used to tell when a profiled program and everything it started have
// exited while its profiler still runs (platform/profiling: the device is given back before ncu's
// report). Linux only; a process that ends during the scan is left out.
#include <string>
#include <vector>

namespace kagent {

struct proc_entry {
  int pid = 0;
  int ppid = 0;
  std::string comm;                  ///< /proc/PID/stat's name (any process may set its own)
  std::string exe;                   ///< /proc/PID/exe's target ("" when unreadable)
  std::vector<std::string> cmdline;  ///< /proc/PID/cmdline's arguments
  /// /proc/PID/status's NSpid: its pid in each PID namespace it is in, outermost (ours) first; the
  /// last is the pid it sees itself (os.getpid() inside a sandbox).
  std::vector<int> nspid;
};

/// `root` and every process below it (children, their children, ...), root first; empty when root
/// is not running.
std::vector<proc_entry> process_tree(int root);

/// The pids of an NSpid line of /proc/PID/status ("NSpid:\t4242\t7"); empty when it is not one.
std::vector<int> parse_nspid(const std::string& line);

/// Parses one /proc/PID/stat line into pid, ppid and comm (comm may hold spaces and parentheses: it
/// ends at the last ')'). False when the line is not one.
bool parse_proc_stat(const std::string& line, proc_entry& out);

} // namespace kagent
