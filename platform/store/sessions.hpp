#pragma once
// The sessions of a run (its first session and each --resume) as program.db's run_state `sessions`
// holds them, and the one GPU-busy formula that the summary, the progress line and the report share:
// device seconds over device capacity (wall time x devices), so a resumed run is never above 100 %.
#include <optional>

#include <nlohmann/json.hpp>

namespace kagent::store {

/// Wall seconds, device seconds and device capacity (wall x devices) of a `sessions` array.
struct session_totals {
  double wall_s = 0;
  double device_s = 0;
  double user_test_s = 0;  ///< of device_s, the kernel directory's test.py runs (absent in older runs: 0)
  double capacity_s = 0;
  int sessions = 0;
};

/// Sums the well-formed entries ({"wall_s", "device_s", "devices", "user_test_s"}) of `sessions`;
/// anything else (not an array, an entry that is not an object, a negative or non-numeric time) is
/// left out. A user_test_s that is missing, not a number or not within [0, device_s] counts 0.
session_totals totals_of(const nlohmann::json& sessions);

/// GPU busy in %: device_s / capacity_s x 100; nullopt when there is no capacity or the figure is
/// not finite.
std::optional<double> busy_pct(double device_s, double capacity_s);

} // namespace kagent::store
