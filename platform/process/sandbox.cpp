#include "platform/process/sandbox.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include <fmt/format.h>

#include "platform/common/env.hpp"
#include "platform/common/errors.hpp"
#include "platform/process/runner.hpp"

namespace kagent {

namespace fs = std::filesystem;

namespace {

std::string first_line(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  auto e = s.find('\n', b);
  std::string line = s.substr(b, e == std::string::npos ? std::string::npos : e - b);
  if (line.size() > 200) line.resize(200);
  return line;
}

std::string host_path() {
  const char* p = std::getenv("PATH");
  return p && *p ? p : "/usr/local/bin:/usr/bin:/bin";
}

bwrap_probe run_probe() {
  bwrap_probe p;
  if (const char* b = std::getenv("KAGENT_BWRAP"); b && *b) {
    p.path = fs::absolute(b).string();
    if (::access(p.path.c_str(), X_OK) != 0) {
      p.why = "KAGENT_BWRAP=" + std::string(b) + " is not an executable file";
      p.path.clear();
      return p;
    }
  } else {
    p.path = find_on_path("bwrap", host_path());
    if (p.path.empty()) {
      p.why = "bwrap not found on PATH (install bubblewrap or set KAGENT_BWRAP)";
      return p;
    }
  }
  process_spec s;
  s.argv = {p.path, "--unshare-pid", "--unshare-net", "--die-with-parent", "--new-session", "--ro-bind", "/", "/",
            "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--", "/bin/true"};
  s.env = current_environment();
  s.timeout = std::chrono::seconds(10);
  auto r = run_process(s);
  if (r.ok()) {
    p.ok = true;
    return p;
  }
  std::string detail = first_line(r.err);
  if (detail.empty()) detail = first_line(r.out);
  p.why = p.path + " cannot create namespaces here: " + r.describe() + (detail.empty() ? "" : " (" + detail + ")");
  return p;
}

std::mutex& probe_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
bwrap_probe*& probe_slot() {
  static bwrap_probe* p = nullptr;
  return p;
}

/// `prlimit --core=0 ... --` for the limits (the prlimit of the host, found on PATH).
std::vector<std::string> prlimit_args(const sandbox_limits& l, bool with_nproc) {
  std::string prlimit = find_on_path("prlimit", host_path());
  if (prlimit.empty()) return {};
  std::vector<std::string> a{prlimit, "--core=0"};
  if (l.max_file_bytes > 0) a.push_back(fmt::format("--fsize={}", l.max_file_bytes));
  if (with_nproc && l.max_processes > 0) a.push_back(fmt::format("--nproc={}", l.max_processes));
  if (l.address_space_bytes > 0) a.push_back(fmt::format("--as={}", l.address_space_bytes));
  if (l.data_bytes > 0) a.push_back(fmt::format("--data={}", l.data_bytes));
  if (l.cpu_time_s > 0) {
    // Soft limit first (SIGXCPU: a death that names its cause), the hard one (SIGKILL) 5 s later.
    const auto soft = static_cast<long long>(std::ceil(l.cpu_time_s));
    a.push_back(fmt::format("--cpu={}:{}", soft, soft + 5));
  }
  a.push_back("--");
  return a;
}

std::string canonical_dir(const std::string& d) {
  std::error_code ec;
  auto p = fs::weakly_canonical(fs::absolute(d), ec);
  return ec ? fs::absolute(d).lexically_normal().string() : p.string();
}

std::vector<std::string> bwrap_prefix(const std::string& bwrap, const sandbox_request& req) {
  std::vector<std::string> a{bwrap, "--unshare-pid"};
  if (!req.network) a.push_back("--unshare-net");
  // IPC namespace left shared: CUDA IPC between a judge and its worker may rely on it.
  a.insert(a.end(), {"--die-with-parent", "--new-session", "--ro-bind", "/", "/", "--dev", "/dev"});
  for (const auto& n : gpu_device_nodes(req.vendor)) a.insert(a.end(), {"--dev-bind", n, n});
  if (req.share_dev_shm && fs::is_directory("/dev/shm")) a.insert(a.end(), {"--bind", "/dev/shm", "/dev/shm"});
  a.insert(a.end(), {"--proc", "/proc", "--tmpfs", "/tmp"});
  // After /tmp's tmpfs, so inputs and scratch directories under /tmp are bound on top of it.
  for (const auto& r : req.readable) {
    std::error_code ec;
    if (r.empty() || !fs::exists(r, ec)) continue;
    const std::string d = canonical_dir(r);
    a.insert(a.end(), {"--ro-bind", d, d});
  }
  for (const auto& w : req.writable) {
    // "{scratch}" stays literal: whoever starts the process puts its own directory there.
    const std::string d = w.find("{scratch}") != std::string::npos ? w : canonical_dir(w);
    a.insert(a.end(), {"--bind", d, d});
  }
  for (const auto& h : req.hidden) {
    std::error_code ec;
    if (!h.empty() && fs::is_regular_file(h, ec)) a.insert(a.end(), {"--ro-bind", "/dev/null", canonical_dir(h)});
  }
  a.push_back("--");
  auto lim = prlimit_args(req.limits, true);
  a.insert(a.end(), lim.begin(), lim.end());
  return a;
}

std::vector<std::string> fallback_prefix(const sandbox_request& req) {
  std::vector<std::string> a;
  std::string setpriv = find_on_path("setpriv", host_path());
  if (!setpriv.empty()) a = {setpriv, "--pdeathsig", "KILL", "--"};
  // No RLIMIT_NPROC here: outside a user namespace it counts every process of the user on the host.
  auto lim = prlimit_args(req.limits, false);
  a.insert(a.end(), lim.begin(), lim.end());
  return a;
}

} // namespace

const bwrap_probe& probe_bwrap() {
  std::lock_guard lk(probe_mutex());
  auto*& slot = probe_slot();
  if (!slot) slot = new bwrap_probe(run_probe());
  return *slot;
}

const bwrap_probe& reprobe_bwrap() {
  std::lock_guard lk(probe_mutex());
  auto*& slot = probe_slot();
  // The old probe is leaked on purpose: a caller may still hold a reference to it.
  slot = new bwrap_probe(run_probe());
  return *slot;
}

std::vector<std::string> gpu_device_nodes(const std::string& vendor) {
  std::vector<std::string> out;
  std::error_code ec;
  auto add = [&](const fs::path& p) {
    if (fs::exists(p, ec)) out.push_back(p.string());
  };
  if (vendor == "nvidia") {
    for (const auto& e : fs::directory_iterator("/dev", ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("nvidia", 0) == 0) out.push_back(e.path().string());
    }
    std::sort(out.begin(), out.end());
  } else if (vendor == "rocm") {
    add("/dev/kfd");
    add("/dev/dri");
  }
  return out;
}

sandbox_limits limits_from_config(const sandbox_config& cfg, const std::string& vendor, double default_cpu_s) {
  sandbox_limits l;
  unsigned long long cap = 0;
  if (cfg.memory_mb > 0) {
    cap = static_cast<unsigned long long>(cfg.memory_mb * 1024.0 * 1024.0);
  } else {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) cap = static_cast<unsigned long long>(pages) * page / 2;
  }
  // CPU platform: the address space (the strictest cap). NVIDIA: the data segment, which CUDA's
  // address-space reservations do not count (docs/sandbox.md). ROCm: none, unmeasured so far.
  if (vendor.empty()) l.address_space_bytes = cap;
  else if (vendor == "nvidia") l.data_bytes = cap;
  l.cpu_time_s = cfg.max_cpu_s > 0 ? cfg.max_cpu_s : default_cpu_s;
  l.max_processes = cfg.max_processes;
  l.max_file_bytes = cfg.max_file_mb > 0 ? static_cast<unsigned long long>(cfg.max_file_mb * 1024.0 * 1024.0) : 0;
  return l;
}

sandbox_plan plan_sandbox(const std::string& mode, const sandbox_request& req) {
  sandbox_plan plan;
  if (mode == "off") {
    plan.mode = "off";
    return plan;
  }
  if (mode != "auto" && mode != "bwrap" && mode != "rlimits")
    throw user_error("sandbox.mode '" + mode + "' is unknown (expected auto, bwrap or off)");
  if (mode != "rlimits") {
    const auto& p = probe_bwrap();
    if (p.ok) {
      plan.mode = "bwrap";
      plan.prefix = bwrap_prefix(p.path, req);
      return plan;
    }
    if (mode == "bwrap")
      throw user_error("sandbox.mode bwrap: bubblewrap does not work here: " + p.why +
                       " (install bubblewrap, point KAGENT_BWRAP at a bwrap binary, or set sandbox.mode auto or off)");
    plan.warning = "sandbox: bubblewrap unavailable (" + p.why +
                   "); candidates run with rlimits and process groups only";
  }
  plan.mode = "rlimits";
  plan.prefix = fallback_prefix(req);
  return plan;
}

std::vector<std::string> sandboxed_argv(const sandbox_plan& plan, const std::vector<std::string>& argv) {
  std::vector<std::string> out = plan.prefix;
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

} // namespace kagent
