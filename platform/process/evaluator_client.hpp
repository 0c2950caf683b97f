#pragma once
// Blocking client of the warm Python evaluator server (harness/evaluator.py), one per device.
//
// The server runs as the leader of its own process group with a complete, caller-provided
// environment (already pinned to one GPU and scrubbed of secrets: this client adds nothing). Requests
// and replies are single-line JSON objects over a socketpair that the child sees as fd 3; the
// server's stdout/stderr go to `<log_dir>/server.log`, and the candidate's output of each request to
// `<log_dir>/request.stdout|stderr`, so nothing a candidate prints can corrupt the protocol.
//
// Every request has a deadline. On expiry, death of the server, a poisoned device context or a
// garbled reply, the whole process group is killed and reaped, the failure is reported, and the next
// request starts a fresh server — replaying the last successful load_problem first, so the caller
// never has to notice the restart. Not thread-safe: one owner (the evaluator actor) drives it.
// The server gets PR_SET_PDEATHSIG(SIGKILL): it dies with kagent-actors (kill -9 included), and also
// when the thread that started it ends, so start it from a thread that outlives it (a detached
// actor, or one of the actor system's scheduler threads, which live until shutdown).
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "platform/common/env.hpp"

namespace kagent {

struct evaluator_options {
  std::string python;   ///< interpreter: absolute path, or a name looked up on env's PATH
  std::string script;   ///< harness/evaluator.py
  env_map env;          ///< the server's complete environment (pinned and scrubbed by the caller)
  std::string cwd;      ///< the server's working directory; empty: inherit ours
  std::string log_dir;  ///< server.log and capture files; empty: a fresh temp dir, removed on destruction
  /// Deadline for the load_problem replayed after a restart (inputs are rebuilt on the device).
  std::chrono::milliseconds replay_timeout{300000};
  std::chrono::milliseconds kill_grace{500};  ///< SIGTERM -> SIGKILL delay when shutting down
  /// RLIMIT_AS in bytes for the server; nullopt leaves it unlimited (CUDA and ROCm reserve far more
  /// virtual address space than they use, so a limit is only sensible on the CPU platform).
  std::optional<unsigned long long> address_space_limit;
  size_t tail_bytes = 4000;  ///< how much of stderr/logs a failure report carries
};

enum class evaluator_failure {
  none,            ///< a reply arrived (its "ok" may still be false: a failing candidate)
  timeout,         ///< no reply before the deadline; the process group was killed
  crashed,         ///< the server died (signal or exit status) without replying
  poisoned,        ///< the server replied that the device context is corrupt, and exits
  protocol_error,  ///< the reply was not a JSON object line, or answered another request
  spawn_failed,    ///< the interpreter could not be executed
  interrupted,     ///< the run is stopping (platform/common/stop.hpp): not sent, or abandoned and killed
};

/// "timeout", "crashed", "poisoned", "protocol_error", "spawn_failed", "interrupted" or "none".
std::string to_string(evaluator_failure f);

struct evaluator_reply {
  evaluator_failure failure = evaluator_failure::none;
  nlohmann::json body;      ///< the server's reply object; also set for `poisoned`; null otherwise
  std::string message;      ///< one line saying what went wrong (empty when failure == none)
  std::string stderr_tail;  ///< candidate stderr of the failed request, else the server log tail
  int term_signal = 0;      ///< the signal that ended the server (crashed)
  int exit_code = -1;       ///< its exit status when it exited (crashed, poisoned)
  double wall_s = 0.0;

  /// The server replied and the operation succeeded (verify passed, benchmark measured ...).
  bool ok() const { return failure == evaluator_failure::none && body.is_object() && body.value("ok", false); }
  /// The server's own error text for a reply with ok=false, or `message` for a transport failure.
  std::string error() const;
};

class evaluator_client {
public:
  explicit evaluator_client(evaluator_options options);
  ~evaluator_client();  ///< shutdown(): nothing is left running
  evaluator_client(const evaluator_client&) = delete;
  evaluator_client& operator=(const evaluator_client&) = delete;

  /// Sends one request (an object with "op"; an "id" is added) and waits for its reply at most
  /// `timeout`. Starts the server first when none is running. Never throws for server failures.
  evaluator_reply request(nlohmann::json req, std::chrono::milliseconds timeout);

  evaluator_reply ping(std::chrono::milliseconds timeout = std::chrono::seconds(60));

  /// Asks the server to exit, then kills the group after `kill_grace`; reaps it. Idempotent.
  void shutdown();

  bool running() const { return pid_ > 0; }
  /// The server's pid, which is also its process group id; 0 when none is running.
  pid_t pid() const { return pid_; }
  /// How many servers this client started so far (1 + restarts).
  int starts() const { return starts_; }
  const std::string& log_dir() const { return options_.log_dir; }

private:
  evaluator_reply start();
  evaluator_reply exchange(const nlohmann::json& req, std::chrono::milliseconds timeout);
  void kill_and_reap(bool graceful);
  evaluator_reply fail(evaluator_failure kind, std::string message);
  std::string failure_tail() const;

  evaluator_options options_;
  bool own_log_dir_ = false;
  pid_t pid_ = 0;
  int sock_ = -1;
  std::string buffer_;
  long long next_id_ = 0;
  int starts_ = 0;
  std::optional<nlohmann::json> last_load_;  ///< replayed after a restart
};

} // namespace kagent
