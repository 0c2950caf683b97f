#pragma once
// Helpers for tests that run the kagent-actors binary in a scratch directory.
#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "platform/process/runner.hpp"

namespace e2e {

namespace fs = std::filesystem;

inline std::string binary() { return std::string{KAGENT_BINARY_DIR} + "/app/kagent-actors"; }
inline std::string source(const std::string& rel) { return std::string{KAGENT_SOURCE_DIR} + "/" + rel; }

struct scratch {
  fs::path dir;
  scratch() {
    static int n = 0;
    dir = fs::temp_directory_path() /
          ("kagent_e2e_" + std::to_string(::getpid()) + "_" + std::to_string(n++) + "_" + std::to_string(::time(nullptr)));
    fs::create_directories(dir);
  }
  ~scratch() { fs::remove_all(dir); }
  std::string write(const std::string& rel, const std::string& text) const {
    fs::create_directories((dir / rel).parent_path());
    std::ofstream(dir / rel) << text;
    return (dir / rel).string();
  }
};

/// Runs the binary with `args`; `env` entries are added to (or, with an empty value, removed from) ours.
inline kagent::process_result run(std::vector<std::string> args, const kagent::env_map& extra = {},
                                  const std::string& cwd = "", int timeout_s = 240) {
  kagent::process_spec s;
  s.argv = {binary()};
  s.argv.insert(s.argv.end(), args.begin(), args.end());
  auto env = kagent::current_environment();
  for (const auto& [k, v] : extra) {
    if (v.empty()) env.erase(k);
    else env[k] = v;
  }
  s.env = env;
  s.cwd = cwd;
  s.timeout = std::chrono::seconds(timeout_s);
  return kagent::run_process(s);
}

/// Starts the binary with `args` in the background, stdout and stderr into `log`; `env` as for run().
inline pid_t spawn_logged(const std::vector<std::string>& args, const kagent::env_map& extra, const fs::path& log) {
  std::vector<std::string> argv{binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  auto env = kagent::current_environment();
  for (const auto& [k, v] : extra) {
    if (v.empty()) env.erase(k);
    else env[k] = v;
  }
  std::vector<std::string> envs;
  for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
  std::vector<char*> av, ev;
  for (auto& x : argv) av.push_back(x.data());
  av.push_back(nullptr);
  for (auto& x : envs) ev.push_back(x.data());
  ev.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, av[0], &fa, nullptr, av.data(), ev.data());
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

inline std::vector<fs::path> run_dirs(const fs::path& base) {
  std::vector<fs::path> out;
  if (!fs::exists(base)) return out;
  for (const auto& e : fs::directory_iterator(base))
    if (e.is_directory()) out.push_back(e.path());
  return out;
}

inline std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::vector<nlohmann::json> events(const fs::path& run) {
  std::vector<nlohmann::json> out;
  std::ifstream f(run / "events.jsonl");
  std::string line;
  while (std::getline(f, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

/// Processes whose command line mentions `needle` (a test's scratch directory is in every child's argv).
inline std::vector<std::string> processes_mentioning(const std::string& needle) {
  std::vector<std::string> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (auto* e = ::readdir(d)) {
    std::string pid = e->d_name;
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f("/proc/" + pid + "/cmdline");
    std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    for (auto& c : cmd)
      if (c == '\0') c = ' ';
    if (cmd.find(needle) != std::string::npos) out.push_back(pid + ": " + cmd);
  }
  ::closedir(d);
  return out;
}

inline bool has_event(const std::vector<nlohmann::json>& ev, const std::string& type) {
  for (const auto& e : ev)
    if (e.value("type", "") == type) return true;
  return false;
}

} // namespace e2e
