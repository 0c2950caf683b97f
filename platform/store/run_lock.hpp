#pragma once
// One owner per run directory. events.jsonl is appended by a single writer and the search state
// assumes one manager; a second `--resume` of the same directory (or a resume while the original
// run is still alive) must be refused instead of interleaving two searches in one database.
// The lock is an flock(2) on <run>/.lock, released by the kernel when the holder dies, so a
// killed run never leaves a stale lock behind.
#include <filesystem>

namespace kagent::store {

class run_lock {
public:
  /// Takes the lock of run directory `run_dir` without waiting. Throws run_error naming the
  /// directory (and the holder's pid when known) when another process holds it.
  explicit run_lock(const std::filesystem::path& run_dir);
  ~run_lock();
  run_lock(run_lock&& other) noexcept;
  run_lock& operator=(run_lock&&) = delete;
  run_lock(const run_lock&) = delete;
  run_lock& operator=(const run_lock&) = delete;

private:
  int fd_ = -1;
};

} // namespace kagent::store
