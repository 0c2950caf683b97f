#pragma once
// Helpers shared by the profiling tests: fixture paths, scratch directories, and running a command
// with the fakes first on PATH.
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "platform/common/env.hpp"
#include "platform/process/runner.hpp"

namespace kagent::test {

inline std::string fakes_dir() { return std::string(KAGENT_SOURCE_DIR) + "/tests/fakes"; }
inline std::string fixture(const std::string& rel) {
  return std::string(KAGENT_SOURCE_DIR) + "/tests/fakes/fixtures/profiling/" + rel;
}

/// A fresh directory under the system temp dir, removed at scope exit.
struct scratch_dir {
  std::filesystem::path path;
  explicit scratch_dir(const std::string& tag) {
    path = std::filesystem::temp_directory_path() /
           ("kagent-prof-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string str() const { return path.string(); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

inline void write_file(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

/// Our environment with the fakes first on PATH and `extra` laid over it.
inline env_map fake_env(const std::map<std::string, std::string>& extra = {}) {
  env_map env = current_environment();
  env["PATH"] = fakes_dir() + ":" + env_get(env, "PATH").value_or("/usr/bin:/bin");
  for (const auto& [k, v] : extra) env[k] = v;
  return env;
}

inline process_result run_cmd(const std::vector<std::string>& argv, const env_map& env, const std::string& cwd = "",
                              double timeout_s = 60) {
  process_spec spec;
  spec.argv = argv;
  spec.env = env;
  spec.cwd = cwd;
  spec.timeout = std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  return run_process(spec);
}

} // namespace kagent::test
