#include "platform/store/util.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "platform/common/errors.hpp"
#include "platform/common/redact.hpp"

namespace kagent::store {

namespace fs = std::filesystem;

std::string iso_utc(std::chrono::system_clock::time_point tp) {
  using namespace std::chrono;
  const auto ms_total = duration_cast<milliseconds>(tp.time_since_epoch()).count();
  // Floor division so that times before the epoch still get a 0..999 millisecond field.
  auto secs = ms_total / 1000;
  auto ms = ms_total % 1000;
  if (ms < 0) {
    ms += 1000;
    secs -= 1;
  }
  const std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

std::string iso_utc_now() { return iso_utc(std::chrono::system_clock::now()); }

namespace {

std::string errno_text(int err) { return std::strerror(err); }

// Writes all of `text` to `fd`, retrying short writes and EINTR.
bool write_all(int fd, std::string_view text, int& err) {
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      err = errno;
      return false;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

} // namespace

void write_file_atomic(const fs::path& path, std::string_view raw) {
  // Every file of a run passes here: a secret that came back in a child's output is redacted by value.
  const std::string text = redact(raw);
  // A name unique per process and call, so concurrent writers of different files (or of the same
  // file from two threads) never share a temporary; the leading dot keeps it out of casual listings.
  static std::atomic<unsigned long> counter{0};
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const fs::path tmp =
      dir / fmt::format(".{}.tmp.{}.{}", path.filename().string(), ::getpid(), counter.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    throw run_error(fmt::format("cannot write {}: {}", path.string(), errno_text(errno)));
  int err = 0;
  bool ok = write_all(fd, text, err);
  if (ok && ::fsync(fd) != 0) {
    err = errno;
    ok = false;
  }
  if (::close(fd) != 0 && ok) {
    err = errno;
    ok = false;
  }
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ok = false;
  }
  if (!ok) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw run_error(fmt::format("cannot write {}: {}", path.string(), errno_text(err)));
  }
}

std::string sha256_hex(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha256(), nullptr) != 1)
    throw run_error("sha256: OpenSSL EVP_Digest failed");
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i)
    out += fmt::format("{:02x}", digest[i]);
  return out;
}

bool is_safe_name(std::string_view name) {
  if (name.empty() || name.size() > 128 || name == "." || name == "..")
    return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok)
      return false;
  }
  return true;
}

} // namespace kagent::store
