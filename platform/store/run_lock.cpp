#include "platform/store/run_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "platform/common/errors.hpp"

namespace kagent::store {

run_lock::run_lock(const std::filesystem::path& run_dir) {
  const auto file = run_dir / ".lock";
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw run_error(fmt::format("cannot lock run directory {}: {}", run_dir.string(), std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {};
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK) {
      std::string pid = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
      while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' '))
        pid.pop_back();
      throw run_error(fmt::format("run directory {} is in use by another kagent-actors process{}",
                                  run_dir.string(), pid.empty() ? "" : fmt::format(" (pid {})", pid)));
    }
    throw run_error(fmt::format("cannot lock run directory {}: {}", run_dir.string(), std::strerror(err)));
  }
  // The pid is only informative (for the message above); the flock is what excludes.
  const std::string pid = fmt::format("{}\n", ::getpid());
  if (::ftruncate(fd_, 0) == 0) {
    [[maybe_unused]] const ssize_t w = ::pwrite(fd_, pid.data(), pid.size(), 0);
  }
}

run_lock::~run_lock() {
  if (fd_ >= 0)
    ::close(fd_);  // closing the descriptor releases the flock
}

run_lock::run_lock(run_lock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

} // namespace kagent::store
