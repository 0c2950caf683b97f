#pragma once
// Runs one child process to completion under a wall-clock deadline. Every child is the leader of its
// own process group; on expiry the whole group is killed (SIGTERM, a short grace, then SIGKILL), so a
// hung profiler or candidate leaves nothing behind. Output is captured concurrently (no pipe
// deadlock) and truncated to a tail of `max_output_bytes` per stream. Once the run is stopping
// (platform/common/stop.hpp) no child starts, and a running one's group is killed within ~100 ms.
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "platform/common/env.hpp"

namespace kagent {

struct process_spec {
  std::vector<std::string> argv;              ///< argv[0] is resolved on the child env's PATH
  std::optional<env_map> env;                 ///< full child environment; nullopt inherits ours
  std::string cwd;                            ///< empty: inherit
  std::chrono::milliseconds timeout{30000};   ///< wall-clock deadline for the whole group
  std::string stdin_data;                     ///< written to the child's stdin, then closed
  size_t max_output_bytes = 1 << 20;          ///< per stream; the tail is kept
  std::chrono::milliseconds kill_grace{500};  ///< between SIGTERM and SIGKILL on expiry
  /// When set, the child's pid is stored here once it runs (0 again once it is reaped): an owner on
  /// another thread can look at the processes below it (platform/process/proc_tree.hpp).
  std::shared_ptr<std::atomic<int>> pid_sink;
  /// The child gives up every capability (bounding, ambient, inheritable, permitted, effective) and
  /// sets no_new_privs before exec: for a process that runs candidate code without a sandbox around
  /// it. As root, with its capabilities, such a process reads kagent-actors' memory (the API key)
  /// through /proc/PID/mem (tests/e2e_containment, UserTestScan). Not for a process that starts
  /// bubblewrap: it needs them as root.
  bool drop_privileges = false;
};

struct process_result {
  bool started = false;       ///< false: the program could not be executed (see error)
  std::string error;          ///< spawn failure text ("No such file or directory")
  int exit_code = -1;         ///< valid when exited normally
  int term_signal = 0;        ///< non-zero when killed by a signal
  bool timed_out = false;     ///< the deadline expired and the group was killed
  bool stopped = false;       ///< the run was interrupted (request_stop) and the group was killed
  std::string out;            ///< stdout (tail)
  std::string err;            ///< stderr (tail)
  double wall_s = 0.0;

  bool ok() const { return started && !timed_out && !stopped && term_signal == 0 && exit_code == 0; }
  /// One line describing how it ended: "exit 3", "killed by signal 11 (SIGSEGV)", "timed out after 5 s".
  std::string describe() const;
};

/// Runs the child and waits for it (blocking the calling thread, never longer than the timeout plus
/// the grace period). Never throws for child failures; those are reported in the result.
process_result run_process(const process_spec& spec);

/// Last `n` bytes of `s`, for error messages.
std::string tail_of(const std::string& s, size_t n);

} // namespace kagent
