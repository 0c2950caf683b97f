#include "platform/store/sessions.hpp"

#include <algorithm>
#include <cmath>

namespace kagent::store {

session_totals totals_of(const nlohmann::json& sessions) {
  session_totals t;
  if (!sessions.is_array()) return t;
  for (const auto& s : sessions) {
    if (!s.is_object()) continue;
    const auto num = [&](const char* key, double fallback) {
      auto it = s.find(key);
      return it != s.end() && it->is_number() ? it->get<double>() : fallback;
    };
    const double wall = num("wall_s", 0.0), dev = num("device_s", 0.0);
    const double devices = std::max(1.0, std::floor(num("devices", 1.0)));
    if (!(wall >= 0) || !(dev >= 0) || !std::isfinite(wall) || !std::isfinite(dev)) continue;
    t.wall_s += wall;
    t.device_s += dev;
    const double tested = num("user_test_s", 0.0);
    if (tested >= 0 && tested <= dev && std::isfinite(tested)) t.user_test_s += tested;
    t.capacity_s += wall * devices;
    ++t.sessions;
  }
  return t;
}

std::optional<double> busy_pct(double device_s, double capacity_s) {
  if (!(capacity_s > 1e-9)) return std::nullopt;
  const double pct = device_s / capacity_s * 100.0;
  if (!std::isfinite(pct)) return std::nullopt;
  return pct;
}

} // namespace kagent::store
