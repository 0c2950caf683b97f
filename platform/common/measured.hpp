#pragma once
// "Not measured": the one in-memory representation of a time (or a percentage derived from one) that
// was not measured. It is a negative sentinel, never NaN or infinity: CAF 0.17's binary serializer
// loops forever on a non-finite double, and every such value crosses actor (and machine) boundaries.
// program.db's columns hold NULL for it (store records read it as an empty std::optional, the edge's
// form), and JSON files hold null.
#include <limits>
#include <optional>

namespace kagent {

inline constexpr double not_measured = -1.0;

inline bool is_measured(double v) { return v >= 0 && v < std::numeric_limits<double>::max(); }

/// The edge's form of a value: empty when not measured (program.db columns, JSON null).
inline std::optional<double> measured_or_none(double v) {
  return is_measured(v) ? std::optional<double>(v) : std::nullopt;
}

/// A stored value back in memory.
inline double measured_or_not(const std::optional<double>& v) { return v && is_measured(*v) ? *v : not_measured; }

}  // namespace kagent
