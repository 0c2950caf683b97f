#include "platform/process/evaluator_client.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "platform/common/stop.hpp"

namespace kagent {

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int protocol_fd = 3;       // what the server sees; evaluator.py --fd 3
constexpr int exec_error_fd = 4;     // CLOEXEC pipe reporting an execve failure to the parent

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "killed by signal " + std::to_string(sig) + " (" + signal_name(sig) + ")";
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended with wait status " + std::to_string(status);
}

std::string file_tail(const fs::path& p, size_t n) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  auto size = static_cast<size_t>(in.tellg());
  size_t start = size > n ? size - n : 0;
  in.seekg(static_cast<std::streamoff>(start));
  std::string s(size - start, '\0');
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  return s;
}

// True once `pid` has exited, without reaping it: the zombie keeps the process group id reserved,
// so the killpg that follows can never hit an unrelated group that reused the number.
bool has_exited(pid_t pid) {
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return errno == ECHILD;
  return info.si_pid == pid;
}

bool wait_exited(pid_t pid, milliseconds limit) {
  auto deadline = clock_type::now() + limit;
  while (!has_exited(pid)) {
    if (clock_type::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

// Reaps `pid` (blocking: callers have made sure it exited or was SIGKILLed). -1 when the status
// was lost (SIGCHLD ignored by someone else).
int reap(pid_t pid) {
  int status = 0;
  for (;;) {
    pid_t r = ::waitpid(pid, &status, 0);
    if (r < 0 && errno == EINTR) continue;
    untrack_child_group(pid);
    return r == pid ? status : -1;
  }
}

} // namespace

std::string to_string(evaluator_failure f) {
  switch (f) {
    case evaluator_failure::none: return "none";
    case evaluator_failure::timeout: return "timeout";
    case evaluator_failure::crashed: return "crashed";
    case evaluator_failure::poisoned: return "poisoned";
    case evaluator_failure::protocol_error: return "protocol_error";
    case evaluator_failure::spawn_failed: return "spawn_failed";
    case evaluator_failure::interrupted: return "interrupted";
  }
  return "unknown";
}

std::string evaluator_reply::error() const {
  if (failure != evaluator_failure::none) return message;
  if (body.is_object() && body.contains("error") && body["error"].is_string()) return body["error"].get<std::string>();
  return {};
}

evaluator_client::evaluator_client(evaluator_options options) : options_(std::move(options)) {
  if (options_.log_dir.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "kagent-evaluator-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("cannot create a temporary directory for the evaluator log: " + std::string(std::strerror(errno)));
    options_.log_dir = tmpl;
    own_log_dir_ = true;
  } else {
    fs::create_directories(options_.log_dir);
  }
}

evaluator_client::~evaluator_client() {
  shutdown();
  if (own_log_dir_) {
    std::error_code ec;
    fs::remove_all(options_.log_dir, ec);
  }
}

evaluator_reply evaluator_client::fail(evaluator_failure kind, std::string message) {
  evaluator_reply r;
  r.failure = kind;
  r.message = std::move(message);
  return r;
}

std::string evaluator_client::failure_tail() const {
  std::string out = file_tail(fs::path(options_.log_dir) / "request.stderr", options_.tail_bytes);
  std::string log = file_tail(fs::path(options_.log_dir) / "server.log", options_.tail_bytes);
  if (!log.empty()) {
    if (!out.empty()) out += '\n';
    out += "[server.log]\n";
    out += log;
  }
  return out.size() > options_.tail_bytes ? out.substr(out.size() - options_.tail_bytes) : out;
}

evaluator_reply evaluator_client::start() {
  std::string python = options_.python;
  if (python.find('/') == std::string::npos) {
    auto path = env_get(options_.env, "PATH");
    python = find_on_path(options_.python, path.value_or(""));
    if (python.empty())
      return fail(evaluator_failure::spawn_failed,
                  "cannot start the evaluator: python interpreter '" + options_.python + "' not found on the child's PATH");
  }
  // Stale capture files would otherwise be reported as this server's output.
  for (const char* name : {"request.stdout", "request.stderr"}) {
    std::error_code ec;
    fs::remove(fs::path(options_.log_dir) / name, ec);
  }

  // Everything the child needs is built before fork(): after it, only async-signal-safe calls.
  std::vector<std::string> args = {python, "-u", options_.script, "--fd", std::to_string(protocol_fd),
                                   "--log-dir", options_.log_dir};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : options_.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string log_path = (fs::path(options_.log_dir) / "server.log").string();
  const char* cwd = options_.cwd.empty() ? nullptr : options_.cwd.c_str();
  const auto as_limit = options_.address_space_limit;

  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return fail(evaluator_failure::spawn_failed, std::string("cannot start the evaluator: socketpair: ") + std::strerror(errno));
  int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int err_pipe[2] = {-1, -1};
  if (log_fd < 0 || null_fd < 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    int e = errno;
    for (int fd : {sv[0], sv[1], log_fd, null_fd, err_pipe[0], err_pipe[1]})
      if (fd >= 0) ::close(fd);
    return fail(evaluator_failure::spawn_failed, "cannot start the evaluator: " + log_path + ": " + std::strerror(e));
  }

  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    // Dies with us (kill -9 included). PDEATHSIG follows the forking thread: the client's owner (a
    // detached actor or a scheduler thread) outlives the server it starts; see the header.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::setpgid(0, 0);
    // Move the fds we keep above the target numbers first, so no dup2 overwrites a source.
    int sock = ::fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
    int err = ::fcntl(err_pipe[1], F_DUPFD_CLOEXEC, 10);
    int logf = ::fcntl(log_fd, F_DUPFD_CLOEXEC, 10);
    int nul = ::fcntl(null_fd, F_DUPFD_CLOEXEC, 10);
    auto die = [&](int code) {
      int e = errno;
      if (::write(err, &e, sizeof e) < 0) {}
      ::_exit(code);
    };
    if (sock < 0 || err < 0 || logf < 0 || nul < 0) die(127);
    if (::dup2(nul, 0) < 0 || ::dup2(logf, 1) < 0 || ::dup2(logf, 2) < 0 || ::dup2(sock, protocol_fd) < 0 ||
        ::dup2(err, exec_error_fd) < 0)
      die(127);
    ::fcntl(exec_error_fd, F_SETFD, FD_CLOEXEC);
    err = exec_error_fd;  // the copies above 10 are closed next
    ::close_range(exec_error_fd + 1, ~0U, 0);
    if (cwd && ::chdir(cwd) != 0) die(127);
    struct rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    if (as_limit) {
      struct rlimit as{static_cast<rlim_t>(*as_limit), static_cast<rlim_t>(*as_limit)};
      ::setrlimit(RLIMIT_AS, &as);
    }
    ::execve(argv[0], argv.data(), envp.data());
    die(127);
  }
  int fork_errno = errno;
  ::close(sv[1]);
  ::close(log_fd);
  ::close(null_fd);
  ::close(err_pipe[1]);
  if (pid < 0) {
    ::close(sv[0]);
    ::close(err_pipe[0]);
    return fail(evaluator_failure::spawn_failed, std::string("cannot start the evaluator: fork: ") + std::strerror(fork_errno));
  }
  ::setpgid(pid, pid);  // also here: whichever runs first, the group exists before we may kill it
  track_child_group(pid);
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(err_pipe[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  ::close(err_pipe[0]);
  ++starts_;
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    ::close(sv[0]);
    reap(pid);
    return fail(evaluator_failure::spawn_failed,
                "cannot start the evaluator '" + python + "' in '" + options_.cwd + "': " + std::strerror(child_errno));
  }
  pid_ = pid;
  sock_ = sv[0];
  buffer_.clear();

  if (last_load_ && starts_ > 1) {
    evaluator_reply r = exchange(*last_load_, options_.replay_timeout);
    if (!r.ok()) {
      if (r.failure == evaluator_failure::none) r.failure = evaluator_failure::crashed;
      r.message = "the restarted evaluator could not reload the problem: " + r.error();
      kill_and_reap(false);
      return r;
    }
  }
  return {};
}

void evaluator_client::kill_and_reap(bool graceful) {
  if (pid_ <= 0) return;
  if (sock_ >= 0) {
    ::close(sock_);
    sock_ = -1;
  }
  if (graceful && !wait_exited(pid_, options_.kill_grace)) {
    ::killpg(pid_, SIGTERM);
    wait_exited(pid_, options_.kill_grace);
  }
  // The leader is alive or an unreaped zombie here, so the group id is still ours.
  ::killpg(pid_, SIGKILL);
  reap(pid_);
  pid_ = 0;
  buffer_.clear();
}

evaluator_reply evaluator_client::exchange(const nlohmann::json& req, milliseconds timeout) {
  const auto t0 = clock_type::now();
  const std::string op = req.value("op", std::string("?"));
  auto finish = [&](evaluator_reply r) {
    r.wall_s = std::chrono::duration<double>(clock_type::now() - t0).count();
    return r;
  };
  auto died = [&](const std::string& when) {
    // The server may still be flushing; give it a moment to exit on its own before the sweep.
    bool exited = wait_exited(pid_, milliseconds(2000));
    pid_t pid = pid_;
    if (sock_ >= 0) {
      ::close(sock_);
      sock_ = -1;
    }
    ::killpg(pid, SIGKILL);
    int status = reap(pid);
    pid_ = 0;
    buffer_.clear();
    evaluator_reply r;
    r.failure = evaluator_failure::crashed;
    r.stderr_tail = failure_tail();
    if (status != -1 && WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
    if (status != -1 && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    std::string how = !exited ? "closed its protocol channel and was killed"
                              : (status == -1 ? "exited (status unavailable)" : describe_status(status));
    r.message = "evaluator process " + std::to_string(pid) + " " + how + " " + when + " '" + op + "'";
    return finish(r);
  };

  const auto deadline = t0 + timeout;
  auto timed_out = [&] {
    pid_t pid = pid_;
    kill_and_reap(false);
    evaluator_reply r;
    r.failure = evaluator_failure::timeout;
    r.stderr_tail = failure_tail();
    r.message = fmt::format("evaluator request '{}' timed out after {:g} s; process group {} killed", op,
                            std::chrono::duration<double>(timeout).count(), pid);
    return finish(r);
  };
  auto ms_left = [&] { return std::chrono::duration_cast<milliseconds>(deadline - clock_type::now()).count(); };
  auto interrupted = [&] {
    kill_and_reap(false);
    evaluator_reply r;
    r.failure = evaluator_failure::interrupted;
    r.message = "evaluator request '" + op + "' was abandoned: the run is stopping (interrupted)";
    return finish(r);
  };

  // Sending is under the same deadline: a wedged server could leave a large request unread.
  const std::string line = req.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  size_t sent = 0;
  while (sent < line.size()) {
    if (ms_left() <= 0) return timed_out();
    if (should_give_up()) return interrupted();
    pollfd p{sock_, POLLOUT, 0};
    int pr = ::poll(&p, 1, static_cast<int>(std::min<long long>(ms_left(), 100)));
    if (pr < 0 && errno != EINTR) return died("(poll failed) before");
    if (pr <= 0) continue;
    ssize_t n = ::send(sock_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return died("before it could receive");
    sent += static_cast<size_t>(n);
  }

  size_t eol;
  while ((eol = buffer_.find('\n')) == std::string::npos) {
    auto left = ms_left();
    if (left <= 0) return timed_out();
    if (should_give_up()) return interrupted();
    pollfd p{sock_, POLLIN, 0};
    int pr = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 100)));
    if (pr < 0 && errno != EINTR) return died("(poll failed) during");
    if (pr <= 0) continue;
    char chunk[65536];
    ssize_t n = ::recv(sock_, chunk, sizeof chunk, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return died("during");
    buffer_.append(chunk, static_cast<size_t>(n));
  }
  std::string text = buffer_.substr(0, eol);
  buffer_.erase(0, eol + 1);

  auto protocol_error = [&](const std::string& why) {
    kill_and_reap(false);
    evaluator_reply r;
    r.failure = evaluator_failure::protocol_error;
    r.stderr_tail = failure_tail();
    r.message = "evaluator protocol error during '" + op + "': " + why + ": " + text.substr(0, 200);
    return finish(r);
  };
  nlohmann::json body = nlohmann::json::parse(text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) return protocol_error("the reply is not a JSON object");
  if (req.contains("id") && body.value("id", nlohmann::json()) != req["id"])
    return protocol_error("the reply answers another request");

  evaluator_reply r;
  r.body = std::move(body);
  if (r.body.value("poisoned", false)) {
    // The server exits by itself after this reply; make sure of it and of its group.
    pid_t pid = pid_;
    if (sock_ >= 0) {
      ::close(sock_);
      sock_ = -1;
    }
    wait_exited(pid, milliseconds(5000));
    ::killpg(pid, SIGKILL);
    int status = reap(pid);
    pid_ = 0;
    buffer_.clear();
    r.failure = evaluator_failure::poisoned;
    if (status != -1 && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    r.stderr_tail = r.body.value("stderr", std::string());
    r.message = "evaluator reported a corrupted device context during '" + op + "': " +
                r.body.value("error", std::string("(no detail)")) + "; it will be restarted";
  }
  return finish(r);
}

evaluator_reply evaluator_client::request(nlohmann::json req, milliseconds timeout) {
  if (!req.is_object() || !req.contains("op"))
    return fail(evaluator_failure::protocol_error, "evaluator request must be a JSON object with an \"op\"");
  if (should_give_up())
    return fail(evaluator_failure::interrupted,
                stop_requested() ? "evaluator request not sent: the run is stopping (interrupted)"
                                 : "evaluator request not sent: its candidate was cancelled (candidate_timeout_s)");
  const bool is_load = req["op"] == "load_problem";
  if (is_load) last_load_.reset();  // a new problem replaces the one a restart would replay
  if (pid_ <= 0) {
    evaluator_reply s = start();
    if (s.failure != evaluator_failure::none) return s;
  }
  req["id"] = ++next_id_;
  evaluator_reply r = exchange(req, timeout);
  if (is_load && r.ok()) {
    last_load_ = req;
    (*last_load_)["id"] = -1;  // replies are matched by id; the replay has its own
  }
  return r;
}

evaluator_reply evaluator_client::ping(milliseconds timeout) { return request({{"op", "ping"}}, timeout); }

void evaluator_client::shutdown() {
  if (pid_ <= 0) return;
  if (sock_ >= 0 && !stop_requested()) {
    static const std::string bye = "{\"op\":\"shutdown\"}\n";
    if (::send(sock_, bye.data(), bye.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bye.size())) {
      pollfd p{sock_, POLLIN, 0};
      ::poll(&p, 1, 2000);
    }
  }
  kill_and_reap(true);
}

} // namespace kagent
