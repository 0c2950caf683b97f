#include "platform/common/redact.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <utility>
#include <vector>

namespace kagent {

namespace {

struct registry {
  std::shared_mutex m;
  std::vector<std::pair<std::string, std::string>> secrets;  // value, name; longest value first
  std::atomic<bool> any{false};
};

registry& reg() {
  // Never destroyed: detached actor threads may still write a file while the process exits.
  static auto* r = new registry;
  return *r;
}

} // namespace

void register_secret(std::string_view name, std::string_view value) {
  if (value.size() < min_secret_length) return;
  auto& r = reg();
  std::unique_lock lk(r.m);
  for (const auto& s : r.secrets)
    if (s.first == value) return;
  r.secrets.emplace_back(std::string(value), std::string(name));
  // Longest first, so a secret that contains another is replaced whole.
  std::stable_sort(r.secrets.begin(), r.secrets.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  r.any.store(true, std::memory_order_release);
}

std::string redact(std::string_view text) {
  auto& r = reg();
  if (!r.any.load(std::memory_order_acquire)) return std::string(text);
  std::string out(text);
  std::shared_lock lk(r.m);
  for (const auto& [value, name] : r.secrets) {
    size_t pos = out.find(value);
    if (pos == std::string::npos) continue;
    const std::string token = "[REDACTED:" + name + "]";
    while (pos != std::string::npos) {
      out.replace(pos, value.size(), token);
      pos = out.find(value, pos + token.size());
    }
  }
  return out;
}

bool contains_secret(std::string_view text) {
  auto& r = reg();
  if (!r.any.load(std::memory_order_acquire)) return false;
  std::shared_lock lk(r.m);
  for (const auto& s : r.secrets)
    if (text.find(s.first) != std::string_view::npos) return true;
  return false;
}

std::size_t registered_secret_count() {
  auto& r = reg();
  std::shared_lock lk(r.m);
  return r.secrets.size();
}

void clear_secrets_for_testing() {
  auto& r = reg();
  std::unique_lock lk(r.m);
  r.secrets.clear();
  r.any.store(false, std::memory_order_release);
}

} // namespace kagent
