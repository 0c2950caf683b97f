#pragma once
// Two more inline SVG charts for report.html (no script, no network):
//  - the best time over wall-clock time with the run's phases: the initial phase (measuring the
//    starting kernel, baseline profiles) and each round as shaded bands. The x axis may start
//    later than zero so that an initial phase of many minutes does not squash the rounds; what is
//    cut off on the left is named on the chart.
//  - the distance to the roofline: one row per verified kernel with its share of the peak (SOL %)
//    and its share of the hardware floor (physics floor / measured time), 0 to 100 %.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "platform/report/svg_chart.hpp"

namespace kagent::report {

struct phase_band {
  double start_s = 0, end_s = 0;
  std::string label;     ///< "initial", "r1", ...
  bool initial = false;  ///< the initial phase (drawn darker)
};

struct wallclock_chart {
  std::string title = "Best time over wall-clock time";
  std::vector<std::pair<double, double>> best;  ///< (seconds since start, best ms so far), ascending
  std::vector<chart_marker> markers;            ///< x in seconds since start
  std::optional<double> reference_y;            ///< the starting kernel's time
  std::vector<phase_band> phases;
  double x_from = 0;                            ///< the axis starts here (seconds)
  double x_to = 0;                              ///< and ends at least here (the end of the run)
};

/// The axis start that keeps the rounds legible: 0 when the initial phase takes at most a fifth of
/// [0, end_s], else a little before `rounds_start_s`.
double legible_x_from(double rounds_start_s, double end_s);

std::string render_wallclock_svg(const wallclock_chart& chart, int width = 960, int height = 320);

struct roofline_row {
  std::string id;                  ///< the kernel's program id (the row's label)
  std::string anchor;              ///< in-page anchor of its details ("" for none)
  std::optional<double> sol_pct;   ///< share of the peak, in %
  std::optional<double> floor_pct; ///< share of the hardware floor, in %
  std::string tooltip;
};

/// Horizontal bars, two per kernel; a frame saying "no profile data" when `rows` is empty.
std::string render_roofline_svg(const std::vector<roofline_row>& rows, int width = 960);

} // namespace kagent::report
