#include "platform/common/env.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

extern char** environ;

namespace kagent {

env_map current_environment() {
  env_map out;
  for (char** e = environ; e && *e; ++e) {
    std::string kv{*e};
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    out.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return out;
}

std::optional<std::string> env_get(const env_map& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

bool glob_match(const std::string& pattern, const std::string& text) {
  // Iterative matcher with single-star backtracking: linear in practice, no recursion.
  size_t p = 0, t = 0, star = std::string::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

env_map scrub_env(const env_map& env, const std::vector<std::string>& patterns) {
  env_map out;
  for (const auto& [k, v] : env) {
    bool secret = false;
    for (const auto& pat : patterns)
      if (glob_match(pat, k)) {
        secret = true;
        break;
      }
    if (!secret) out.emplace(k, v);
  }
  return out;
}

const std::vector<std::string>& default_secret_patterns() {
  static const std::vector<std::string> pats{"*_API_KEY", "*_TOKEN", "*SECRET*", "*_PASSWORD",
                                             "AWS_*KEY*"};
  return pats;
}

std::string find_on_path(const std::string& name, const std::string& path_var) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  std::stringstream ss{path_var};
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    std::string cand = dir + "/" + name;
    struct stat st{};
    if (::stat(cand.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(cand.c_str(), X_OK) == 0)
      return cand;
  }
  return "";
}

} // namespace kagent

#include <filesystem>

namespace kagent {
std::string install_root() {
  namespace fs = std::filesystem;
  if (const char* h = std::getenv("KAGENT_HOME"); h && *h) return h;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path p = exe.parent_path(); !p.empty(); p = p.parent_path()) {
      if (fs::exists(p / "configs" / "noop.yaml", ec)) return p.string();
      if (p == p.root_path()) break;
    }
  }
#ifdef KAGENT_SOURCE_DIR
  return KAGENT_SOURCE_DIR;
#else
  return fs::current_path(ec).string();
#endif
}
} // namespace kagent
