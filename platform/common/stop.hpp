#pragma once
// The graceful stop of a run (Ctrl-C, SIGTERM), process-wide.
//
// Two halves, kept apart on purpose:
//  - the signal: SIGINT/SIGTERM handlers only remember which signal came first (stop_signal()). The
//    runtime polls it and first tells the manager, which stops recording results and writes the
//    interrupted summary; a second signal kills every child process group and ends the process at once.
//  - the stop: once request_stop() is called, every blocking wait on a child or on the network gives
//    up within about 100 ms and kills what it waits for (run_process, the evaluator client, the HTTP
//    client, the replay delay), and no new child process starts. It is never undone in a run.
// Child process groups are tracked (their leaders' pids) so that the second signal can kill them from
// inside the handler.
#include <sys/types.h>

#include <string>

namespace kagent {

/// From now on blocking waits give up and no child starts. Thread- and async-signal-safe.
void request_stop() noexcept;
bool stop_requested() noexcept;
/// Undoes request_stop() and forgets the signal: only for tests that stop a run in-process.
void clear_stop_for_tests() noexcept;

/// The work of one candidate, cancelled on its own (its candidate_timeout_s expired) while the run
/// goes on. A thread that works for a candidate opens a work_scope with the candidate's id; once
/// cancel_work(id) is called, should_give_up() is true on that thread, so its blocking waits (the
/// ones that honour the run's stop) give up within about 100 ms and kill what they wait for, and it
/// starts no child. Cancelled ids are never forgotten in a run (ids are unique within a run).
void cancel_work(const std::string& key);
bool work_cancelled(const std::string& key);
/// The run is stopping, or the calling thread's work scope was cancelled.
bool should_give_up() noexcept;
/// Forgets every cancelled id: only for tests.
void clear_cancelled_for_tests();
/// Waits `seconds` in short slices unless should_give_up() turns true first (a simulated slow
/// endpoint or device). Returns false when it gave up early.
bool wait_unless_giving_up(double seconds);

class work_scope {
public:
  explicit work_scope(std::string key);
  ~work_scope();
  work_scope(const work_scope&) = delete;
  work_scope& operator=(const work_scope&) = delete;

private:
  std::string key_;
  const std::string* outer_;
};

/// The first SIGINT/SIGTERM received since install_stop_handlers(), 0 when none.
int stop_signal() noexcept;
/// "SIGINT", "SIGTERM" or "signal N".
const char* stop_signal_name(int sig) noexcept;

/// SIGINT and SIGTERM: the first is only remembered (stop_signal()); the second sends SIGKILL to
/// every tracked child group, says so on stderr and ends the process with status 130 (_exit: no
/// destructor runs; program.db is SQLite in WAL mode and stays consistent).
void install_stop_handlers() noexcept;
/// The default dispositions again (the run is over).
void remove_stop_handlers() noexcept;

/// A child process group (leader pid) that is alive now; untrack it once it is reaped. At most 1024
/// are tracked at once; more are not tracked (the first signal still stops them through the stop).
void track_child_group(pid_t leader) noexcept;
void untrack_child_group(pid_t leader) noexcept;
/// Sends `sig` to every tracked group. Async-signal-safe.
void signal_child_groups(int sig) noexcept;

} // namespace kagent
