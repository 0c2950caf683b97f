#pragma once
// A kernel_profile_request wired to the fake rocprofv3 / ncu, for the runner and actor tests.
#include <signal.h>

#include <cerrno>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "platform/common/files.hpp"
#include "platform/profiling/profile_runner.hpp"
#include "platform/profile_core/profile_common.hpp"
#include "test_support.hpp"

namespace kagent::test {

inline std::string matvec_dir() { return std::string(KAGENT_SOURCE_DIR) + "/examples/optimize_01_matvec"; }
inline std::string matvec_code() { return read_file(matvec_dir() + "/input.py"); }

/// The harness interpreter (torch + triton), for the cases that really run the wrapper.
inline std::string harness_python() {
#ifdef KAGENT_PYTHON
  return KAGENT_PYTHON;
#else
  return std::string(KAGENT_SOURCE_DIR) + "/.venv/bin/python";
#endif
}
inline bool harness_python_usable() {
  auto r = run_cmd({harness_python(), "-c", "import torch, triton"}, current_environment(), "", 120);
  return r.ok();
}

/// Every JSON line of a fake's log (empty when the fake never ran).
inline std::vector<nlohmann::json> log_lines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

/// True while a process with this pid exists and is not a zombie.
inline bool process_alive(int pid) {
  if (::kill(pid, 0) != 0) return errno != ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto close = all.rfind(')');
  return close == std::string::npos || close + 2 >= all.size() || all[close + 2] != 'Z';
}

struct runner_case {
  scratch_dir root{"runner"};
  kernel_profile_request req;

  /// platform "rocm": fixture under FAKE_ROCPROF_FIXTURES, log in <root>/fake.log, the program not run,
  /// no MFMA pass (each skipped child saves an interpreter start). "nvidia": the ncu equivalents.
  runner_case(const std::string& platform, const std::string& fixture_name,
              const std::map<std::string, std::string>& extra = {}, double budget_s = 600) {
    std::map<std::string, std::string> vars;
    if (platform == "rocm")
      vars = {{"FAKE_ROCPROF_FIXTURES", fixture(fixture_name)},
              {"FAKE_ROCPROF_LOG", root / "fake.log"},
              {"FAKE_ROCPROF_RUN_PROGRAM", "0"}};
    else
      vars = {{"FAKE_NCU_FIXTURES", fixture(fixture_name)},
              {"FAKE_NCU_LOG", root / "fake.log"},
              {"FAKE_NCU_RUN_PROGRAM", "0"}};
    for (const auto& [k, v] : extra) vars[k] = v;
    req.platform = platform;
    req.code = matvec_code();
    req.kernel_id = "w0_r1_sol";
    req.dir = root / "profile_w0_r1_sol";
    req.python = "python3";
    req.install_root = KAGENT_SOURCE_DIR;
    req.problem_path = matvec_dir() + "/problem.py";
    req.env = fake_env(vars);
    req.budget_s = budget_s;
    req.gpu_name = platform == "rocm" ? "AMD Instinct MI300X" : "NVIDIA H200";
    req.device = "cpu";
    req.with_mfma = false;
  }
  kernel_profile_outcome run() const { return profile_kernel(req); }
  std::string dir(const std::string& name) const { return req.dir + "/" + name; }
  std::vector<nlohmann::json> log() const { return log_lines(root / "fake.log"); }
};

inline std::vector<std::string> record_names(const kernel_profile_outcome& o) {
  std::vector<std::string> out;
  for (const auto& r : o.records) out.push_back(r.name);
  return out;
}

} // namespace kagent::test
