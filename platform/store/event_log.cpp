#include "platform/store/event_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "platform/common/errors.hpp"
#include "platform/common/redact.hpp"
#include "platform/store/util.hpp"
#include "platform/common/files.hpp"

namespace kagent::store {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool write_all(int fd, const std::string& text, int& err) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      err = errno;
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

} // namespace

event_log::event_log(fs::path path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw run_error(fmt::format("cannot open event log {}: {}", path_.string(), std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd_, &st) == 0 && st.st_size > 0) {
    char last = '\n';
    if (::pread(fd_, &last, 1, st.st_size - 1) == 1 && last != '\n') {
      int err = 0;
      if (!write_all(fd_, "\n", err)) {
        ::close(fd_);
        throw run_error(fmt::format("cannot write event log {}: {}", path_.string(), std::strerror(err)));
      }
    }
  }
}

event_log::~event_log() {
  if (fd_ >= 0)
    ::close(fd_);
}

std::string event_log::append(std::string_view type, const json& fields) {
  if (!fields.is_null() && !fields.is_object())
    throw run_error(fmt::format("event log {}: fields of event '{}' must be a JSON object, got {}",
                                path_.string(), type, fields.type_name()));
  // ts and type go first so that the file reads (and greps) naturally; nlohmann's object keeps
  // keys sorted, so the header is written by hand and the payload's keys follow.
  json head = json::object();
  head["ts"] = iso_utc_now();
  head["type"] = std::string(type);
  std::string line = head.dump(-1, ' ', false, json::error_handler_t::replace);
  json rest = fields.is_object() ? fields : json::object();
  rest.erase("ts");
  rest.erase("type");
  if (!rest.empty()) {
    const std::string body = rest.dump(-1, ' ', false, json::error_handler_t::replace);
    line.pop_back();  // '}'
    line += ',';
    line.append(body, 1, std::string::npos);  // without '{'
  }
  line = redact(line);  // a child's output quoted in an event must not carry a secret out
  const std::string out = line + '\n';
  std::lock_guard<std::mutex> guard(mutex_);
  int err = 0;
  if (!write_all(fd_, out, err))
    throw run_error(fmt::format("cannot write event log {}: {}", path_.string(), std::strerror(err)));
  return line;
}

std::vector<json> read_events(const fs::path& path, std::size_t* skipped) {
  const std::string text = read_file(path);
  std::vector<json> events;
  std::size_t pos = 0;
  std::size_t bad = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos)
      nl = text.size();
    const std::string_view line(text.data() + pos, nl - pos);
    pos = nl + 1;
    if (line.empty())
      continue;
    json ev = json::parse(line, nullptr, false);
    if (ev.is_discarded() || !ev.is_object()) {
      ++bad;
      continue;
    }
    events.push_back(std::move(ev));
  }
  if (skipped)
    *skipped = bad;
  return events;
}

} // namespace kagent::store
