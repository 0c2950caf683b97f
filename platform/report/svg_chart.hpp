#pragma once
// Inline SVG charts for report.html, drawn here so that the page needs no script and no network.
// One kind: a step line of the best time so far, with a marker per candidate (a dot for a verified
// one at its time, a red cross along the bottom for a failed one) and a dashed line at the
// starting kernel's time. Markers carry a <title>, which browsers show on hover without script.
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kagent::report {

struct chart_marker {
  double x = 0;
  std::optional<double> y;  ///< the candidate's time; unset for a failed candidate
  bool failed = false;
  std::string label;        ///< tooltip text
};

struct step_chart {
  std::string title;
  std::string x_label, y_label;
  bool x_integer = false;     ///< x counts things: ticks at whole numbers only
  bool x_is_seconds = false;  ///< x is seconds: the axis label gets "(s)", or "(mm:ss)" ticks past two minutes
  std::vector<std::pair<double, double>> best;    ///< (x, best y so far), x ascending
  std::vector<chart_marker> markers;
  std::optional<double> reference_y;              ///< the starting kernel's time
  std::string reference_label = "starting kernel";
};

/// An <svg> element (no XML prolog, no namespace URL) of `width` x `height` CSS pixels. A chart
/// with no data still renders its frame and says so.
std::string render_svg(const step_chart& chart, int width = 960, int height = 320);

/// Up to about `target` round tick values covering [0, max] (1, 2, 2.5 or 5 times a power of ten).
std::vector<double> nice_ticks(double max, int target = 5);

} // namespace kagent::report
