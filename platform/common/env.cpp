#include "platform/common/env.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include "platform/common/redact.hpp"

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
  static const std::vector<std::string> pats{"*_API_KEY", "*_TOKEN", "*SECRET*", "*_PASSWORD", "*PASSPHRASE*",
                                             "AWS_*KEY*"};
  return pats;
}

namespace {

std::mutex& vault_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
env_map& vault() {
  static auto* v = new env_map;
  return *v;
}

bool matches_any(const std::string& name, const std::vector<std::string>& patterns,
                 const std::vector<std::string>& names) {
  for (const auto& n : names)
    if (n == name) return true;
  for (const auto& p : patterns)
    if (glob_match(p, name)) return true;
  return false;
}

/// [env_start, env_end) of this process: the block the kernel shows as /proc/self/environ (fields 50
/// and 51 of /proc/self/stat, after the parenthesised command name).
bool original_env_block(char*& begin, char*& end) {
  std::ifstream f("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto close = stat.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream ss(stat.substr(close + 1));
  std::string field;
  unsigned long long start = 0, stop = 0;
  for (int i = 3; i <= 51 && (ss >> field); ++i) {
    if (i == 50) start = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 51) stop = std::strtoull(field.c_str(), nullptr, 10);
  }
  if (start == 0 || stop <= start) return false;
  begin = reinterpret_cast<char*>(static_cast<uintptr_t>(start));
  end = reinterpret_cast<char*>(static_cast<uintptr_t>(stop));
  return true;
}

/// Zeroes the value of a "NAME=VALUE" string in place.
void zero_value(char* entry) {
  char* eq = std::strchr(entry, '=');
  if (eq) std::memset(eq + 1, 0, std::strlen(eq + 1));
}

} // namespace

std::vector<std::string> scrub_own_environment(const std::vector<std::string>& patterns,
                                               const std::vector<std::string>& names) {
  std::lock_guard lk(vault_mutex());
  std::vector<std::string> removed;
  std::vector<char*> entries;
  for (char** e = environ; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (!eq) continue;
    std::string name(*e, static_cast<size_t>(eq - *e));
    if (!matches_any(name, patterns, names)) continue;
    std::string value(eq + 1);
    register_secret(name, value);
    vault().insert_or_assign(name, value);
    removed.push_back(name);
    entries.push_back(*e);
  }
  for (const auto& n : removed) ::unsetenv(n.c_str());
  // After unsetenv: the strings are no longer reachable through environ, only through memory we
  // still own (the original block on the stack, or setenv's heap copies glibc never frees).
  for (char* e : entries) zero_value(e);
  // Entries of the original block that environ no longer points at (unset earlier, or replaced by a
  // setenv) still show in /proc/self/environ; zero those that name a secret too.
  char* begin = nullptr;
  char* end = nullptr;
  if (original_env_block(begin, end)) {
    for (char* p = begin; p < end;) {
      size_t len = strnlen(p, static_cast<size_t>(end - p));
      const char* eq = static_cast<const char*>(std::memchr(p, '=', len));
      if (eq && eq > p) {
        std::string name(p, static_cast<size_t>(eq - p));
        if (matches_any(name, patterns, names)) {
          std::string value(eq + 1, len - static_cast<size_t>(eq + 1 - p));
          if (!value.empty()) {
            register_secret(name, value);
            vault().emplace(name, value);  // environ's value (if it differed) wins
          }
          std::memset(p + (eq + 1 - p), 0, len - static_cast<size_t>(eq + 1 - p));
        }
      }
      p += len + 1;
    }
  }
  return removed;
}

env_map scrubbed_secrets() {
  std::lock_guard lk(vault_mutex());
  return vault();
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
      // An installed tree (cmake --install, scripts/install.sh): PREFIX/bin/kagent-actors and
      // PREFIX/share/kagent-actors/{configs,templates,harness}.
      if (fs::exists(p / "share" / "kagent-actors" / "configs" / "noop.yaml", ec))
        return (p / "share" / "kagent-actors").string();
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
