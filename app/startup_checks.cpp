#include "app/startup_checks.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <system_error>

#include "platform/common/errors.hpp"
#include "platform/llm/extract.hpp"

namespace fs = std::filesystem;

namespace kagent::app {

std::vector<int> parse_gpu_ids(const std::string& s) {
  std::vector<int> ids;
  std::stringstream ss{s};
  std::string item;
  while (std::getline(ss, item, ',')) {
    int v = -1;
    try {
      size_t pos = 0;
      v = std::stoi(item, &pos);
      if (pos != item.size() || v < 0) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw user_error("--gpu-ids '" + s + "': expected comma-separated non-negative integers, e.g. 0,1");
    }
    // A repeated id would put two gpu workers on one device: their timings would disturb each other.
    if (std::find(ids.begin(), ids.end(), v) != ids.end())
      throw user_error(fmt::format("--gpu-ids '{}': device {} is listed twice; expected distinct device ids, e.g. 0,1",
                                   s, v));
    ids.push_back(v);
  }
  if (ids.empty()) throw user_error("--gpu-ids is empty: expected comma-separated device ids, e.g. 0,1");
  return ids;
}

namespace {

/// The whole of `value` as a finite number of seconds, or nothing.
std::optional<double> strict_seconds(const std::string& value) {
  const char* begin = value.c_str();
  char* end = nullptr;
  errno = 0;
  const double s = std::strtod(begin, &end);
  if (end == begin || *end != '\0' || errno == ERANGE || !std::isfinite(s)) return std::nullopt;
  return s;
}

} // namespace

void check_replay_delay(const std::string& value) {
  if (value.empty()) return;
  // The replay provider ignores what it cannot use; silently serving at full speed is not what a
  // test or demo that set the variable asked for.
  if (auto s = strict_seconds(value); !s || *s < 0 || *s >= 3600)
    throw user_error(fmt::format("KAGENT_REPLAY_DELAY_S='{}': expected a number of seconds from 0 to below 3600, "
                                 "e.g. 0.5",
                                 value));
}

void check_noop_device_time(const std::string& value) {
  if (value.empty()) return;
  // The noop backend ignores what it cannot use; a scaling benchmark would then measure nothing.
  if (auto s = strict_seconds(value); !s || *s <= 0 || *s > 600)
    throw user_error(fmt::format("KAGENT_NOOP_DEVICE_S='{}': expected a number of seconds above 0 and up to 600, "
                                 "e.g. 1.5",
                                 value));
}

void check_inject_fault(const std::string& value) {
  if (value.empty()) return;
  std::stringstream ss{value};
  std::string item;
  auto bad = [&](const std::string& why) {
    throw user_error(fmt::format("KAGENT_INJECT_FAULT='{}': {}; expected comma-separated candidate_throw:<id> or "
                                 "gpu_worker_throw:<id> (<id> a candidate id such as r1_c0, or *)",
                                 value, why));
  };
  int items = 0;
  while (std::getline(ss, item, ',')) {
    ++items;
    if (item.empty()) bad("empty entry");
    const auto colon = item.find(':');
    if (colon == std::string::npos) bad(fmt::format("'{}' has no ':<id>'", item));
    const auto kind = item.substr(0, colon);
    const auto id = item.substr(colon + 1);
    if (kind != "candidate_throw" && kind != "gpu_worker_throw") bad(fmt::format("unknown fault '{}'", kind));
    if (id.empty()) bad(fmt::format("'{}' names no candidate", item));
    if (id != "*" && !std::all_of(id.begin(), id.end(), [](unsigned char c) {
          return std::isalnum(c) || c == '_' || c == '-' || c == '.';
        }))
      bad(fmt::format("'{}' is not a candidate id", id));
  }
  if (value.back() == ',' || items == 0) bad("empty entry");
}

namespace {

/// A count of processes started ahead, "0" to "4" (or unset/empty). Read where they start, which
/// would keep its default for a value it cannot use: refused here instead.
void check_standby_count(const char* name, const std::string& value, const char* what, const char* unset) {
  if (value.empty()) return;
  if (value.size() != 1 || value[0] < '0' || value[0] > '4')
    throw user_error(fmt::format("{}='{}': expected how many {} wait started ahead, 0 to 4 (unset: {})", name, value,
                                 what, unset));
}

} // namespace

void check_test_standby(const std::string& value) {
  // device_backend.cpp starts them
  check_standby_count("KAGENT_TEST_STANDBY", value, "test.py processes", "2 on a GPU platform, 0 on the cpu platform");
}

void check_ncu_standby(const std::string& value) {
  // profile_runner.cpp starts them (standby_depth)
  check_standby_count("KAGENT_NCU_STANDBY", value, "ncu processes", "2 on a GPU, 1 on the cpu platform");
}

void check_environment(const env_map& env) {
  if (auto it = env.find("KAGENT_TEST_STANDBY"); it != env.end()) check_test_standby(it->second);
  if (auto it = env.find("KAGENT_NCU_STANDBY"); it != env.end()) check_ncu_standby(it->second);
  if (auto it = env.find("KAGENT_REPLAY_DELAY_S"); it != env.end()) check_replay_delay(it->second);
  if (auto it = env.find("KAGENT_INJECT_FAULT"); it != env.end()) check_inject_fault(it->second);
  if (auto it = env.find("KAGENT_NOOP_DEVICE_S"); it != env.end()) check_noop_device_time(it->second);
}

namespace {

std::string human_bytes(uintmax_t n) {
  if (n >= 1024 * 1024) return fmt::format("{:.1f} MiB", static_cast<double>(n) / (1024.0 * 1024.0));
  if (n >= 1024) return fmt::format("{:.1f} KiB", static_cast<double>(n) / 1024.0);
  return fmt::format("{} bytes", n);
}

// A directory with no write bit at all is read-only by intent, even for root (who could write to it).
bool writable_dir(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return false;
  if ((st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0) return false;
  return ::access(p.c_str(), W_OK | X_OK) == 0;
}

} // namespace

void check_kernel_files(const std::string& dir, size_t max_bytes) {
  if (dir.empty()) throw user_error("--kernel-dir is required (a directory holding input.py, problem.py and test.py)");
  std::error_code ec;
  const auto st = fs::status(dir, ec);
  if (ec && st.type() != fs::file_type::not_found)
    throw user_error(fmt::format("--kernel-dir {}: cannot be read ({}); expected a directory holding input.py, "
                                 "problem.py and test.py",
                                 dir, ec.message()));
  if (!fs::is_directory(st)) throw user_error("--kernel-dir " + dir + ": not a directory");
  for (const char* name : {"input.py", "problem.py", "test.py"}) {
    const fs::path f = fs::path(dir) / name;
    const auto fst = fs::status(f, ec);
    if (ec && fst.type() != fs::file_type::not_found)
      throw user_error(fmt::format("--kernel-dir {}: {} cannot be read ({})", dir, name, ec.message()));
    if (!fs::is_regular_file(fst))
      throw user_error(fmt::format("--kernel-dir {}: missing {} (a kernel directory needs input.py, problem.py "
                                   "and test.py)",
                                   dir, name));
    const auto size = fs::file_size(f, ec);
    if (ec) throw user_error(fmt::format("--kernel-dir {}: {} cannot be read ({})", dir, name, ec.message()));
    if (size > max_bytes)
      throw user_error(fmt::format("--kernel-dir {}: {} is {} ({} bytes), over max_kernel_bytes ({} bytes); it goes "
                                   "into every prompt: shrink it or raise max_kernel_bytes in the strategy config",
                                   dir, name, human_bytes(size), size, max_bytes));
    std::ifstream in(f, std::ios::binary);
    if (!in) throw user_error(fmt::format("--kernel-dir {}: {} cannot be read (permission denied?)", dir, name));
    std::stringstream text;
    text << in.rdbuf();
    const std::string body = text.str();
    if (const auto at = first_invalid_utf8(body); at != std::string_view::npos)
      throw user_error(fmt::format("--kernel-dir {}: {} is not valid UTF-8 (first bad byte at offset {}); save it "
                                   "as UTF-8",
                                   dir, name, at));
  }
}

void check_run_dir_base(const std::string& base) {
  if (base.empty()) throw user_error("--run-dir is empty: expected a directory where run directories are created");
  fs::path p = fs::absolute(base).lexically_normal();
  // The nearest existing ancestor decides: create_directories would make the rest.
  for (;;) {
    std::error_code ec;
    const auto st = fs::status(p, ec);
    if (st.type() == fs::file_type::not_found) {
      if (!p.has_parent_path() || p.parent_path() == p) break;
      p = p.parent_path();
      continue;
    }
    if (ec) throw user_error(fmt::format("--run-dir {}: cannot be used ({})", base, ec.message()));
    if (!fs::is_directory(st))
      throw user_error(fmt::format("--run-dir {}: {} is not a directory; expected a directory where run directories "
                                   "are created",
                                   base, p.string()));
    if (!writable_dir(p))
      throw user_error(fmt::format("--run-dir {}: {} is read-only; expected a directory this user can write to",
                                   base, p.string()));
    return;
  }
}

void check_resume_dir(const std::string& dir) {
  std::error_code ec;
  const auto st = fs::status(dir, ec);
  if (ec && st.type() != fs::file_type::not_found)
    throw user_error(fmt::format("--resume {}: cannot be read ({})", dir, ec.message()));
  if (!fs::is_directory(st)) throw user_error("--resume " + dir + ": not a directory");
  if (!writable_dir(dir))
    throw user_error(fmt::format("--resume {}: read-only; a resumed run writes into its run directory", dir));
}

} // namespace kagent::app
