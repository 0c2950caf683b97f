#include "platform/process/runner.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

#include "platform/common/stop.hpp"

namespace kagent {

namespace {

/// In a forked child (async-signal-safe): no capability now or after exec, none regained through a
/// set-uid program. The bounding set first: dropping from it needs CAP_SETPCAP, which the capset
/// below removes. Best-effort: a process that had none keeps none.
void drop_every_capability() {
  ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  for (int cap = 0; cap < 64; ++cap) ::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  ::syscall(SYS_capset, &header, data);
}

using clock_type = std::chrono::steady_clock;

void append_tail(std::string& buf, const char* data, size_t n, size_t cap) {
  buf.append(data, n);
  // Trim in large steps so a chatty child does not cost a memmove per read.
  if (buf.size() > cap * 2) buf.erase(0, buf.size() - cap);
}

std::vector<char*> to_cstrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

bool group_alive(pid_t pgid) { return ::killpg(pgid, 0) == 0; }

} // namespace

std::string tail_of(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(s.size() - n);
}

std::string process_result::describe() const {
  if (!started) return "could not start: " + error;
  if (stopped) return "stopped: the run was interrupted (process group killed)";
  if (timed_out) return fmt::format("timed out after {:.1f} s (process group killed)", wall_s);
  if (term_signal != 0) {
    const char* name = ::sigabbrev_np(term_signal);
    return fmt::format("killed by signal {} (SIG{})", term_signal, name ? name : "?");
  }
  return fmt::format("exit {}", exit_code);
}

// Hand-written fork/exec rather than Boost.Process v1: v1's wait_for is broken in 1.74 (#69) and its
// SIGCHLD service steals statuses from other io_contexts (TOOLCHAIN.md §5). A poll() loop over the
// pipes with a deadline, killpg on expiry and waitpid on our own pid has none of those problems.
process_result run_process(const process_spec& spec) {
  process_result res;
  if (spec.argv.empty()) {
    res.error = "empty command line";
    return res;
  }
  if (should_give_up()) {
    res.error = stop_requested() ? "the run is stopping (interrupted); nothing new starts"
                                 : "its candidate was cancelled (candidate_timeout_s); nothing new starts";
    return res;
  }
  const env_map env = spec.env ? *spec.env : current_environment();
  std::string exe = spec.argv[0];
  if (exe.find('/') == std::string::npos) {
    auto path = env_get(env, "PATH");
    exe = find_on_path(exe, path ? *path : "/usr/bin:/bin");
    if (exe.empty()) {
      res.error = spec.argv[0] + ": No such file or directory (not found on PATH)";
      return res;
    }
  }

  int out_pipe[2], err_pipe[2], in_pipe[2], exec_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) || ::pipe2(err_pipe, O_CLOEXEC) || ::pipe2(in_pipe, O_CLOEXEC) ||
      ::pipe2(exec_pipe, O_CLOEXEC)) {
    res.error = std::string{"pipe: "} + std::strerror(errno);
    return res;
  }

  std::vector<std::string> args = spec.argv;
  std::vector<std::string> envs;
  for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
  auto argv_c = to_cstrings(args);
  auto envp_c = to_cstrings(envs);

  const auto t0 = clock_type::now();
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    res.error = std::string{"fork: "} + std::strerror(errno);
    return res;
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls from here on.
    // Dies with us: PDEATHSIG fires when the forking *thread* ends, which is safe here because this
    // thread blocks in run_process until the child is reaped. If we died before prctl, give up.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::setpgid(0, 0);
    ::dup2(in_pipe[0], 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    struct rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    if (spec.drop_privileges) drop_every_capability();
    if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) {
      int e = errno;
      (void)!::write(exec_pipe[1], &e, sizeof e);
      ::_exit(127);
    }
    ::execve(exe.c_str(), argv_c.data(), envp_c.data());
    int e = errno;
    (void)!::write(exec_pipe[1], &e, sizeof e);
    ::_exit(127);
  }
  // Parent. Set the group from this side too, so killpg works even if we race the child's setpgid.
  ::setpgid(pid, pid);
  track_child_group(pid);
  if (spec.pid_sink) spec.pid_sink->store(pid);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ::close(exec_pipe[1]);

  int exec_errno = 0;
  ssize_t n = ::read(exec_pipe[0], &exec_errno, sizeof exec_errno);
  ::close(exec_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof exec_errno)) {
    int st = 0;
    ::waitpid(pid, &st, 0);
    untrack_child_group(pid);
    ::close(in_pipe[1]);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    res.error = (spec.cwd.empty() ? spec.argv[0] : spec.argv[0] + " (cwd " + spec.cwd + ")") + ": " +
                std::strerror(exec_errno);
    return res;
  }
  res.started = true;

  // Feed stdin without blocking: a child that never reads must not stall us past the deadline.
  size_t in_off = 0;
  int in_fd = in_pipe[1];
  ::fcntl(in_fd, F_SETFL, O_NONBLOCK);
  if (spec.stdin_data.empty()) {
    ::close(in_fd);
    in_fd = -1;
  }
  int fds[2] = {out_pipe[0], err_pipe[0]};
  std::string* bufs[2] = {&res.out, &res.err};
  const auto deadline = t0 + spec.timeout;
  bool exited = false;
  int status = 0;
  // Once the child has exited, a grandchild that inherited its stdout may keep the pipe open forever;
  // we drain for a short while and then sweep the group instead of waiting for the full deadline.
  auto drain_deadline = deadline;
  char chunk[65536];

  auto reap = [&](bool block) {
    if (exited) return;
    pid_t r = ::waitpid(pid, &status, block ? 0 : WNOHANG);
    if (r == pid) {
      exited = true;
      if (spec.pid_sink) spec.pid_sink->store(0);
      drain_deadline = std::min(deadline, clock_type::now() + std::chrono::milliseconds(1500));
    }
  };

  while (true) {
    reap(false);
    bool pipes_open = fds[0] >= 0 || fds[1] >= 0;
    // Done when the child has exited and its pipes are drained, or when it exited and only a
    // grandchild keeps a pipe open (then we stop at the deadline below).
    if (exited && !pipes_open) break;
    auto now = clock_type::now();
    if (now >= deadline && !exited) {
      res.timed_out = true;
      break;
    }
    if (should_give_up()) {
      // The run is interrupted: no grace, the group goes now (the sweep below).
      res.stopped = true;
      break;
    }
    if (exited && now >= drain_deadline) break;
    pollfd p[3];
    int np = 0;
    for (int i = 0; i < 2; ++i)
      if (fds[i] >= 0) p[np++] = {fds[i], POLLIN, 0};
    if (in_fd >= 0) p[np++] = {in_fd, POLLOUT, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(drain_deadline - now).count();
    int wait_ms = static_cast<int>(std::min<long long>(left, exited ? 50 : 100));
    if (np == 0) {
      ::usleep(static_cast<useconds_t>(std::min(wait_ms, 20)) * 1000);
      continue;
    }
    int pr = ::poll(p, static_cast<nfds_t>(np), wait_ms);
    if (pr < 0 && errno != EINTR) break;
    for (int k = 0; k < np; ++k) {
      if (!p[k].revents) continue;
      if (p[k].fd == in_fd) {
        ssize_t w = ::write(in_fd, spec.stdin_data.data() + in_off, spec.stdin_data.size() - in_off);
        if (w > 0) in_off += static_cast<size_t>(w);
        if (w < 0 && errno != EAGAIN) in_off = spec.stdin_data.size();
        if (in_off >= spec.stdin_data.size()) {
          ::close(in_fd);
          in_fd = -1;
        }
        continue;
      }
      int i = p[k].fd == fds[0] ? 0 : 1;
      ssize_t r = ::read(fds[i], chunk, sizeof chunk);
      if (r > 0) {
        append_tail(*bufs[i], chunk, static_cast<size_t>(r), spec.max_output_bytes);
      } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
        ::close(fds[i]);
        fds[i] = -1;
      }
    }
  }

  if (res.timed_out) {
    ::killpg(pid, SIGTERM);
    auto grace_end = clock_type::now() + spec.kill_grace;
    while (clock_type::now() < grace_end) {
      reap(false);
      if (exited && !group_alive(pid)) break;
      ::usleep(10000);
    }
  }
  // Sweep anything left in the group (grandchildren that closed their stdio, or a hung child).
  ::killpg(pid, SIGKILL);
  reap(true);
  untrack_child_group(pid);
  for (int i = 0; i < 2; ++i) {
    if (fds[i] < 0) continue;
    ::fcntl(fds[i], F_SETFL, O_NONBLOCK);
    ssize_t r;
    while ((r = ::read(fds[i], chunk, sizeof chunk)) > 0)
      append_tail(*bufs[i], chunk, static_cast<size_t>(r), spec.max_output_bytes);
    ::close(fds[i]);
  }
  if (in_fd >= 0) ::close(in_fd);
  for (auto* b : bufs)
    if (b->size() > spec.max_output_bytes) b->erase(0, b->size() - spec.max_output_bytes);

  res.wall_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  if (WIFEXITED(status)) res.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) res.term_signal = WTERMSIG(status);
  if (res.timed_out) res.exit_code = -1;
  return res;
}

} // namespace kagent
