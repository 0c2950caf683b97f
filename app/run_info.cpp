#include "app/run_info.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "platform/common/errors.hpp"

namespace fs = std::filesystem;

namespace kagent::app {

lock_probe probe_run_lock(const fs::path& run_dir) {
  lock_probe p;
  // O_RDONLY without O_CREAT: a run that never took its lock keeps no .lock file, and we add none.
  const int fd = ::open((run_dir / ".lock").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    p.known = errno == ENOENT;
    return p;
  }
  // A shared lock conflicts only with the holder's exclusive one, fails at once (LOCK_NB) while it
  // is held, and is dropped at once otherwise.
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      p.held = true;
      char buf[32] = {};
      const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
      if (n > 0) p.pid.assign(buf, static_cast<size_t>(n));
      while (!p.pid.empty() && (p.pid.back() == '\n' || p.pid.back() == ' ')) p.pid.pop_back();
    }
  } else {
    ::flock(fd, LOCK_UN);
  }
  ::close(fd);
  return p;
}

bool looks_like_run_dir(const fs::path& dir) {
  std::error_code ec;
  for (const char* f : {"config.yaml", "program.db", "summary.json"})
    if (fs::exists(dir / f, ec)) return true;
  return false;
}

namespace {

std::optional<double> num(const nlohmann::json& j, const char* key) {
  if (j.is_object() && j.contains(key) && j[key].is_number()) return j[key].get<double>();
  return std::nullopt;
}

std::optional<std::int64_t> count(const nlohmann::json& j, const char* key) {
  if (j.is_object() && j.contains(key) && j[key].is_number_integer()) return j[key].get<std::int64_t>();
  return std::nullopt;
}

std::string str(const nlohmann::json& j, const char* key) {
  if (j.is_object() && j.contains(key) && j[key].is_string()) return j[key].get<std::string>();
  return "";
}

std::optional<double> state_ms(const std::map<std::string, std::string>& st, const char* key) {
  auto it = st.find(key);
  if (it == st.end()) return std::nullopt;
  auto j = nlohmann::json::parse(it->second, nullptr, false);
  if (j.is_number()) return j.get<double>();
  return std::nullopt;
}

/// "20261203-145701-..." -> "2026-12-03 14:57:01"; "" when the name does not start with a stamp.
std::string stamp_of_id(const std::string& id) {
  if (id.size() < 15 || id[8] != '-') return "";
  for (int i : {0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14})
    if (!std::isdigit(static_cast<unsigned char>(id[static_cast<size_t>(i)]))) return "";
  return fmt::format("{}-{}-{} {}:{}:{}", id.substr(0, 4), id.substr(4, 2), id.substr(6, 2), id.substr(9, 2),
                     id.substr(11, 2), id.substr(13, 2));
}

std::string mtime_of(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return "";
  const std::time_t tt = st.st_mtime;
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

} // namespace

run_info read_run_info(const fs::path& run_dir) {
  run_info r;
  r.path = fs::absolute(run_dir).lexically_normal();
  if (!r.path.has_filename()) r.path = r.path.parent_path();
  r.id = r.path.filename().string();
  std::error_code ec;

  const auto summary_file = r.path / "summary.json";
  if (fs::exists(summary_file, ec)) {
    std::ifstream in(summary_file);
    std::stringstream ss;
    ss << in.rdbuf();
    auto j = nlohmann::json::parse(ss.str(), nullptr, false);
    if (j.is_object()) r.summary = std::move(j);
    else r.problems.push_back("summary.json is not a JSON object (corrupt or cut short)");
  } else {
    r.problems.push_back("no summary.json (the run has not ended, or was killed)");
  }

  const auto db_file = r.path / "program.db";
  if (fs::exists(db_file, ec)) {
    try {
      auto db = store::program_db::open(db_file, store::program_db::mode::read_only);
      for (auto& [k, v] : db.all_state())
        if (k.find(':') == std::string::npos) r.state[k] = v;
      r.db_status = r.state.count(store::state_key::status) ? r.state[store::state_key::status] : "";
      const auto programs = db.count();
      r.candidates = db.get_program("initial") ? programs - 1 : programs;
      r.verified = db.count(store::program_status::verified);
      r.failed = db.count(store::program_status::failed);
      r.pending = db.count(store::program_status::pending);
      r.failures_by_cause = db.failures_by_cause();
      r.top = db.top_k_verified(5);
      r.llm_usage = db.llm_usage();
      if (auto init = db.get_program("initial"); init && init->time_ms) r.initial_ms = init->time_ms;
      r.have_db = true;
    } catch (const std::exception& e) {
      r.problems.push_back(fmt::format("program.db cannot be read: {}", e.what()));
    }
  } else {
    r.problems.push_back("no program.db");
  }

  r.lock = probe_run_lock(r.path);
  if (!r.db_status.empty()) {
    r.status = r.db_status;
    if (r.status == "running" && !r.lock.held && r.lock.known) r.status = "stopped";
    if (r.status == "running" && !r.lock.known) r.problems.push_back("its run lock cannot be probed (permission)");
  } else if (r.summary && r.summary->contains("success") && (*r.summary)["success"].is_boolean()) {
    r.status = (*r.summary)["success"].get<bool>() ? "finished" : "failed";
  } else {
    r.status = r.lock.held ? "running" : "unknown";
  }

  // The database answers first for what it records; summary.json fills in the rest.
  if (!r.initial_ms) r.initial_ms = state_ms(r.state, store::state_key::initial_ms);
  r.eager_ms = state_ms(r.state, store::state_key::eager_ms);
  r.compile_ms = state_ms(r.state, store::state_key::compile_ms);
  if (!r.top.empty() && r.top.front().time_ms) {
    r.best_ms = r.top.front().time_ms;
    r.best_program_id = r.top.front().id;
  }
  if (auto it = r.state.find(store::state_key::strategy_name); it != r.state.end()) r.strategy = it->second;
  if (auto it = r.state.find(store::state_key::kernel_dir); it != r.state.end()) r.kernel_dir = it->second;
  if (r.summary) {
    const auto& s = *r.summary;
    if (auto v = num(s, "best_ms")) r.best_ms = v;
    if (auto v = num(s, "initial_ms")) r.initial_ms = v;
    if (auto v = num(s, "eager_ms")) r.eager_ms = v;
    if (auto v = num(s, "compile_ms")) r.compile_ms = v;
    if (auto v = str(s, "best_program_id"); !v.empty()) r.best_program_id = v;
    if (auto v = str(s, "strategy"); !v.empty()) r.strategy = v;
    if (auto v = str(s, "kernel_dir"); !v.empty()) r.kernel_dir = v;
    r.search = str(s, "search");
    if (!r.have_db) {
      r.candidates = count(s, "candidates");
      r.verified = count(s, "verified");
      r.failed = count(s, "failed");
      if (s.contains("failures_by_cause") && s["failures_by_cause"].is_object())
        for (const auto& [k, v] : s["failures_by_cause"].items())
          if (v.is_number_integer()) r.failures_by_cause[k] = v.get<std::int64_t>();
    }
  }
  r.started = stamp_of_id(r.id);
  if (r.started.empty()) r.started = mtime_of(r.path / "config.yaml");
  if (r.started.empty()) r.started = mtime_of(r.path);
  return r;
}

std::optional<double> speedup(const std::optional<double>& base, const std::optional<double>& t) {
  if (!base || !t || !std::isfinite(*base) || !std::isfinite(*t) || *base <= 0 || *t <= 0) return std::nullopt;
  return *base / *t;
}

fs::path resolve_run(const std::string& run, const std::string& base) {
  if (run.empty()) throw user_error("RUN is empty: expected a run directory or a run id under " + base);
  std::error_code ec;
  auto check = [&](const fs::path& p) {
    if (!looks_like_run_dir(p))
      throw user_error(fmt::format("{} is not a run directory (no config.yaml, program.db or summary.json in it)",
                                   p.string()));
    return p;
  };
  if (fs::is_directory(run, ec)) return check(run);
  const fs::path under = fs::path(base) / run;
  if (run.find('/') == std::string::npos && fs::is_directory(under, ec)) return check(under);
  if (run.find('/') != std::string::npos || !fs::is_directory(base, ec))
    throw user_error(fmt::format("no run '{}': not a directory, and no run id '{}' under {}", run, run, base));
  std::vector<std::string> matches;
  for (const auto& e : fs::directory_iterator(base, ec)) {
    const auto name = e.path().filename().string();
    if (e.is_directory(ec) && name.rfind(run, 0) == 0) matches.push_back(name);
  }
  std::sort(matches.begin(), matches.end());
  if (matches.size() == 1) return check(fs::path(base) / matches.front());
  if (matches.empty())
    throw user_error(fmt::format("no run '{}' under {} (list them with: kagent-actors runs {})", run, base, base));
  std::string some;
  for (size_t i = 0; i < matches.size() && i < 5; ++i) some += (i ? ", " : "") + matches[i];
  throw user_error(fmt::format("run id prefix '{}' matches {} runs under {} ({}{}); give more of the id", run,
                               matches.size(), base, some, matches.size() > 5 ? ", ..." : ""));
}

std::string fmt_ms(const std::optional<double>& ms) {
  if (!ms || !std::isfinite(*ms)) return "-";
  return fmt::format("{:.4g} ms", *ms);
}

std::string fmt_x(const std::optional<double>& x) {
  if (!x || !std::isfinite(*x)) return "-";
  return fmt::format("{:.2f}x", *x);
}

} // namespace kagent::app
