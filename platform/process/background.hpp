#pragma once
// A process run on a thread of its own: the shape of every process this tool starts ahead of its
// work (the ncu standby, the test.py standby), which wait for a hand-over and must be killable at any
// moment by their owner or by the run's stop.
#include <atomic>
#include <chrono>
#include <memory>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include "platform/process/runner.hpp"

namespace kagent {

/// run_process(spec) on a thread that opens work_scope(key), so cancel_work(key) kills the process
/// (its group, within about 100 ms) and the run's stop does too. The thread is always joined: by
/// finish() or, for a process nobody finished, by the destructor, which kills it first. Not
/// thread-safe: one owner.
class background_process {
public:
  background_process(process_spec spec, std::string key);
  ~background_process();
  background_process(const background_process&) = delete;
  background_process& operator=(const background_process&) = delete;

  const std::string& key() const { return key_; }
  /// The process's pid while it runs (0 before it started and once it was reaped).
  int pid() const { return pid_->load(); }
  /// It has ended (on its own, or killed); its result is ready for finish().
  bool ended() const;
  /// Waits up to `limit` for it to end by itself, checking `give_up` (when given) every 100 ms;
  /// returns how the wait ended. It does not kill the process: finish() does.
  enum class waited { ended, limit, gave_up };
  waited wait(std::chrono::duration<double> limit, const std::function<bool()>& give_up = {});
  /// Kills it when it is still running, joins its thread and returns its result (never throws: a
  /// failure to run it at all is a result with started false). Call once.
  process_result finish();

private:
  std::string key_;
  std::shared_ptr<std::atomic<int>> pid_ = std::make_shared<std::atomic<int>>(0);
  std::promise<process_result> promise_;
  std::future<process_result> result_;
  std::thread thread_;
};

} // namespace kagent
