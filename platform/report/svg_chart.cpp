#include "platform/report/svg_chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "platform/report/text.hpp"

namespace kagent::report {

std::vector<double> nice_ticks(double max, int target) {
  std::vector<double> ticks;
  if (!std::isfinite(max) || max <= 0) return {0, 1};
  const double raw = max / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double f : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = f * mag;
    if (step >= raw) break;
  }
  for (int i = 0; i <= target * 3 + 2; ++i) {
    const double t = i * step;
    ticks.push_back(t);
    if (t >= max) break;
  }
  return ticks;
}

namespace {

std::string tick_text(double v, bool seconds) {
  if (seconds) return format_duration(v);
  if (v == std::floor(v) && std::abs(v) < 1e9) return fmt::format("{}", static_cast<long long>(v));
  return fmt::format("{:.4g}", v);
}

/// Ticks at whole minutes (or hours) covering [0, max] seconds.
std::vector<double> clock_ticks_for(double max, int target) {
  double step = 60;
  for (double s : {60.0, 120.0, 300.0, 600.0, 900.0, 1200.0, 1800.0, 3600.0, 7200.0, 10800.0, 21600.0, 43200.0, 86400.0}) {
    step = s;
    if (max / s <= target) break;
  }
  std::vector<double> ticks;
  for (double t = 0;; t += step) {
    ticks.push_back(t);
    if (t >= max || ticks.size() > 64) break;
  }
  return ticks;
}

} // namespace

std::string render_svg(const step_chart& c, int width, int height) {
  const double left = 72, right = 24, top = 36, bottom = 52;
  const double pw = width - left - right, ph = height - top - bottom;
  std::string s = fmt::format(
      "<svg class=\"chart\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" role=\"img\" aria-label=\"{2}\">\n",
      width, height, html_escape(c.title));
  s += fmt::format("<text x=\"{}\" y=\"20\" class=\"chart-title\">{}</text>\n", left, html_escape(c.title));

  double xmax = 0, ymax = 0;
  for (const auto& [x, y] : c.best) {
    if (std::isfinite(x)) xmax = std::max(xmax, x);
    if (std::isfinite(y)) ymax = std::max(ymax, y);
  }
  for (const auto& m : c.markers)
    if (std::isfinite(m.x)) xmax = std::max(xmax, m.x);
  if (c.reference_y && std::isfinite(*c.reference_y)) ymax = std::max(ymax, *c.reference_y);
  // Verified candidates far slower than the start would squash the interesting part: the axis
  // covers at most twice the starting (or worst best) time and slower markers sit on the top edge.
  const double y_cap = ymax > 0 ? ymax * 2 : 0;
  for (const auto& m : c.markers)
    if (m.y && std::isfinite(*m.y)) ymax = std::max(ymax, y_cap > 0 ? std::min(*m.y, y_cap) : *m.y);
  const bool empty = c.markers.empty();
  if (xmax <= 0) xmax = 1;
  if (ymax <= 0) ymax = 1;
  // Short runs read better in seconds (0.25, 0.5 ...), long ones as mm:ss on whole minutes.
  const bool clock_ticks = c.x_is_seconds && xmax > 120;
  auto xt = clock_ticks ? clock_ticks_for(xmax, 6) : nice_ticks(xmax, 6);
  if (c.x_integer && xt.size() > 1 && xt[1] < 1) {
    xt.clear();
    for (int i = 0; i <= static_cast<int>(std::ceil(xmax)); ++i) xt.push_back(i);
  }
  const auto yt = nice_ticks(ymax * 1.05, 5);
  xmax = xt.back();
  ymax = yt.back();
  const std::string x_label =
      c.x_label + (c.x_is_seconds ? (clock_ticks ? (xmax >= 3600 ? " (h:mm:ss)" : " (mm:ss)") : " (s)") : "");
  auto X = [&](double x) { return left + std::clamp(x, 0.0, xmax) / xmax * pw; };
  auto Y = [&](double y) { return top + ph - std::clamp(y, 0.0, ymax) / ymax * ph; };

  // grid and axes
  for (double t : yt) {
    s += fmt::format("<line class=\"grid\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>", left, Y(t),
                     left + pw, Y(t));
    s += fmt::format("<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 6,
                     Y(t) + 4, html_escape(tick_text(t, false)));
  }
  for (double t : xt) {
    s += fmt::format("<line class=\"grid\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>", X(t), top, X(t),
                     top + ph);
    s += fmt::format("<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", X(t),
                     top + ph + 16, html_escape(tick_text(t, clock_ticks)));
  }
  s += fmt::format("<rect class=\"frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\n", left, top, pw, ph);
  s += fmt::format("<text class=\"axis-label\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", left + pw / 2,
                   height - 10, html_escape(x_label));
  s += fmt::format(
      "<text class=\"axis-label\" x=\"16\" y=\"{:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {:.1f})\">{}</text>\n",
      top + ph / 2, top + ph / 2, html_escape(c.y_label));

  if (empty) {
    s += fmt::format("<text class=\"no-data\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">no candidates</text>\n",
                     left + pw / 2, top + ph / 2);
  }
  if (c.reference_y && std::isfinite(*c.reference_y) && *c.reference_y > 0) {
    s += fmt::format("<line class=\"reference\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"><title>{}</title></line>\n",
                     left, Y(*c.reference_y), left + pw, Y(*c.reference_y),
                     html_escape(c.reference_label + " " + format_ms(*c.reference_y)));
    s += fmt::format("<text class=\"reference-label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
                     left + pw - 4, Y(*c.reference_y) - 4, html_escape(c.reference_label));
  }
  // candidate markers under the line
  for (const auto& m : c.markers) {
    if (!std::isfinite(m.x)) continue;
    const double x = X(m.x);
    if (m.failed || !m.y || !std::isfinite(*m.y)) {
      const double y = top + ph - 6;
      s += fmt::format("<path class=\"fail\" d=\"M{:.1f} {:.1f}l8 8M{:.1f} {:.1f}l-8 8\"><title>{}</title></path>\n",
                       x - 4, y - 4, x + 4, y - 4, html_escape(m.label));
    } else if (*m.y > ymax) {
      s += fmt::format("<path class=\"point clipped\" d=\"M{:.1f} {:.1f}l4 7h-8z\"><title>{}</title></path>\n", x, top,
                       html_escape(m.label));
    } else {
      s += fmt::format("<circle class=\"point\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\"><title>{}</title></circle>\n", x,
                       Y(*m.y), html_escape(m.label));
    }
  }
  // the best-so-far step line, carried on to the right edge
  if (!c.best.empty()) {
    std::string d = fmt::format("M{:.1f} {:.1f}", X(c.best.front().first), Y(c.best.front().second));
    for (std::size_t i = 1; i < c.best.size(); ++i)
      d += fmt::format("H{:.1f}V{:.1f}", X(c.best[i].first), Y(c.best[i].second));
    d += fmt::format("H{:.1f}", left + pw);
    s += fmt::format("<path class=\"best\" d=\"{}\"><title>best so far</title></path>\n", d);
  }
  s += "</svg>\n";
  return s;
}

} // namespace kagent::report
