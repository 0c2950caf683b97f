#include "platform/common/stop.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

namespace kagent {

namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};
std::atomic<int> g_count{0};

constexpr int max_groups = 1024;
std::atomic<pid_t> g_groups[max_groups];

static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free &&
                  std::atomic<pid_t>::is_always_lock_free,
              "the signal handler relies on lock-free atomics");

void say(const char* text) noexcept { (void)!::write(2, text, std::strlen(text)); }

void on_signal(int sig) {
  if (g_count.fetch_add(1) == 0) {
    g_signal.store(sig);
    return;
  }
  // The second signal: no more waiting for anything.
  signal_child_groups(SIGKILL);
  say("\nkagent-actors: second signal: killed every child process; exiting now\n");
  ::_exit(130);
}

std::mutex g_cancel_mutex;
std::set<std::string> g_cancelled;          // guarded by g_cancel_mutex
std::atomic<int> g_cancelled_count{0};      // lets should_give_up skip the lock while none is cancelled
thread_local const std::string* t_scope = nullptr;

} // namespace

void request_stop() noexcept { g_stop.store(true); }
bool stop_requested() noexcept { return g_stop.load(std::memory_order_relaxed); }

void cancel_work(const std::string& key) {
  std::lock_guard<std::mutex> lock(g_cancel_mutex);
  if (g_cancelled.insert(key).second) g_cancelled_count.fetch_add(1);
}

bool work_cancelled(const std::string& key) {
  if (g_cancelled_count.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard<std::mutex> lock(g_cancel_mutex);
  return g_cancelled.count(key) > 0;
}

bool wait_unless_giving_up(double seconds) {
  using clock = std::chrono::steady_clock;
  const auto until = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
  while (clock::now() < until) {
    if (should_give_up()) return false;
    std::this_thread::sleep_for(std::min<clock::duration>(until - clock::now(), std::chrono::milliseconds(50)));
  }
  return !should_give_up();
}

bool should_give_up() noexcept {
  if (stop_requested()) return true;
  if (!t_scope || g_cancelled_count.load(std::memory_order_relaxed) == 0) return false;
  try {
    return work_cancelled(*t_scope);
  } catch (...) {
    return false;
  }
}

void clear_cancelled_for_tests() {
  std::lock_guard<std::mutex> lock(g_cancel_mutex);
  g_cancelled.clear();
  g_cancelled_count.store(0);
}

work_scope::work_scope(std::string key) : key_(std::move(key)), outer_(t_scope) { t_scope = &key_; }
work_scope::~work_scope() { t_scope = outer_; }

void clear_stop_for_tests() noexcept {
  g_stop.store(false);
  g_signal.store(0);
  g_count.store(0);
}

int stop_signal() noexcept { return g_signal.load(); }

const char* stop_signal_name(int sig) noexcept {
  switch (sig) {
  case SIGINT: return "SIGINT";
  case SIGTERM: return "SIGTERM";
  default: return "a signal";
  }
}

void install_stop_handlers() noexcept {
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

void remove_stop_handlers() noexcept {
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
}

void track_child_group(pid_t leader) noexcept {
  if (leader <= 0) return;
  for (auto& slot : g_groups) {
    pid_t empty = 0;
    if (slot.compare_exchange_strong(empty, leader)) return;
  }
}

void untrack_child_group(pid_t leader) noexcept {
  if (leader <= 0) return;
  for (auto& slot : g_groups) {
    pid_t mine = leader;
    if (slot.compare_exchange_strong(mine, 0)) return;
  }
}

void signal_child_groups(int sig) noexcept {
  for (auto& slot : g_groups) {
    const pid_t p = slot.load();
    if (p > 0) ::killpg(p, sig);
  }
}

} // namespace kagent
