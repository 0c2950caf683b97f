#include "platform/process/background.hpp"

#include <algorithm>

#include "platform/common/stop.hpp"

namespace kagent {

background_process::background_process(process_spec spec, std::string key) : key_(std::move(key)) {
  result_ = promise_.get_future();
  spec.pid_sink = pid_;
  thread_ = std::thread([this, spec = std::move(spec)] {
    work_scope scope(key_);
    process_result r;
    try {
      r = run_process(spec);
    } catch (const std::exception& e) {  // run_process reports child failures; this is ours (no memory, no thread)
      r.started = false;
      r.error = e.what();
    }
    promise_.set_value(std::move(r));
  });
}

background_process::~background_process() {
  if (!thread_.joinable()) return;
  if (!ended()) cancel_work(key_);
  thread_.join();
}

bool background_process::ended() const {
  return !result_.valid() || result_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

background_process::waited background_process::wait(std::chrono::duration<double> limit,
                                                     const std::function<bool()>& give_up) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::nanoseconds>(limit);
  const auto slice = std::chrono::milliseconds(100);
  while (true) {
    if (ended()) return waited::ended;
    if (give_up && give_up()) return waited::gave_up;
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) return waited::limit;
    const auto step = std::min<std::chrono::steady_clock::duration>(slice, until - now);
    if (result_.wait_for(step) == std::future_status::ready) return waited::ended;
  }
}

process_result background_process::finish() {
  if (!ended()) cancel_work(key_);
  auto r = result_.get();
  if (thread_.joinable()) thread_.join();
  return r;
}

} // namespace kagent
