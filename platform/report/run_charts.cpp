#include "platform/report/run_charts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "platform/report/text.hpp"

namespace kagent::report {

namespace {

std::string esc(std::string_view s) { return html_escape(s); }

/// Tick values inside [lo, hi]: whole minutes (or hours) past two minutes of span, else round seconds.
std::vector<double> span_ticks(double lo, double hi, bool clock) {
  const double span = std::max(hi - lo, 1e-9);
  double step = 1;
  if (clock) {
    for (double s : {60.0, 120.0, 300.0, 600.0, 900.0, 1200.0, 1800.0, 3600.0, 7200.0, 10800.0, 21600.0, 43200.0, 86400.0}) {
      step = s;
      if (span / s <= 6) break;
    }
  } else {
    const auto t = nice_ticks(span, 6);
    step = t.size() > 1 && t[1] > 0 ? t[1] : 1;
  }
  std::vector<double> out;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + 1e-9 && out.size() < 64; v += step) out.push_back(v);
  return out;
}

std::string time_tick(double v, bool clock) {
  if (clock) return format_duration(v);
  const double r = std::round(v * 1000) / 1000;
  return fmt::format("{:g}", r == 0 ? 0.0 : r);  // never "-0"
}

} // namespace

double legible_x_from(double rounds_start_s, double end_s) {
  if (!(rounds_start_s > 0) || !(end_s > rounds_start_s)) return 0;
  if (rounds_start_s <= 0.2 * end_s) return 0;
  // A margin of 3 % of the rounds' span keeps the first round's markers off the frame.
  return std::max(0.0, rounds_start_s - 0.03 * (end_s - rounds_start_s));
}

std::string render_wallclock_svg(const wallclock_chart& c, int width, int height) {
  const double left = 72, right = 24, top = 36, bottom = 52;
  const double pw = width - left - right, ph = height - top - bottom;
  std::string s = fmt::format(
      "<svg class=\"chart wallclock\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" role=\"img\" "
      "aria-label=\"{2}\">\n<text x=\"{3}\" y=\"20\" class=\"chart-title\">{2}</text>\n",
      width, height, esc(c.title), left);
  double x0 = std::isfinite(c.x_from) ? std::max(0.0, c.x_from) : 0;
  double x1 = std::max(x0, std::isfinite(c.x_to) ? c.x_to : 0);
  double ymax = 0;
  for (const auto& [x, y] : c.best) {
    if (std::isfinite(x)) x1 = std::max(x1, x);
    if (std::isfinite(y)) ymax = std::max(ymax, y);
  }
  for (const auto& m : c.markers)
    if (std::isfinite(m.x)) x1 = std::max(x1, m.x);
  if (c.reference_y && std::isfinite(*c.reference_y)) ymax = std::max(ymax, *c.reference_y);
  const double y_cap = ymax > 0 ? ymax * 2 : 0;
  for (const auto& m : c.markers)
    if (m.y && std::isfinite(*m.y)) ymax = std::max(ymax, y_cap > 0 ? std::min(*m.y, y_cap) : *m.y);
  if (x1 <= x0) x1 = x0 + 1;
  if (ymax <= 0) ymax = 1;
  const bool clock = x1 > 120;
  const auto xt = span_ticks(x0, x1, clock);
  const auto yt = nice_ticks(ymax * 1.05, 5);
  ymax = yt.back();
  auto X = [&](double x) { return left + (std::clamp(x, x0, x1) - x0) / (x1 - x0) * pw; };
  auto Y = [&](double y) { return top + ph - std::clamp(y, 0.0, ymax) / ymax * ph; };

  // Phases under everything else: shaded bands, a line and a label where each one starts.
  int shade = 0;
  for (const auto& p : c.phases) {
    if (!std::isfinite(p.start_s) || !std::isfinite(p.end_s) || p.end_s <= x0 || p.start_s >= x1) continue;
    const double a = X(p.start_s), b = X(std::max(p.start_s, p.end_s));
    const char* cls = p.initial ? "phase phase-initial" : (shade++ % 2 == 0 ? "phase phase-a" : "phase phase-b");
    s += fmt::format("<rect class=\"{}\" x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\"><title>{}: {} - {}</title></rect>\n",
                     cls, a, top, std::max(0.5, b - a), ph, esc(p.label), esc(format_duration(p.start_s)),
                     esc(format_duration(p.end_s)));
    if (p.start_s >= x0)
      s += fmt::format("<line class=\"phase-line\" x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\"/>\n", a, top, top + ph);
    if (b - a >= 8.0 * static_cast<double>(p.label.size()) + 4)
      s += fmt::format("<text class=\"phase-label\" x=\"{:.1f}\" y=\"{}\">{}</text>\n", a + 3, top + 12, esc(p.label));
  }
  for (double t : yt)
    s += fmt::format("<line class=\"grid\" x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\"/><text class=\"tick\" "
                     "x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
                     left, Y(t), left + pw, left - 6, Y(t) + 4, esc(fmt::format("{:g}", t)));
  for (double t : xt)
    s += fmt::format("<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\"/><text class=\"tick\" "
                     "x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
                     X(t), top, top + ph, top + ph + 16, esc(time_tick(t, clock)));
  s += fmt::format("<rect class=\"frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\n", left, top, pw, ph);
  std::string x_label = std::string("wall-clock time since start ") + (clock ? (x1 >= 3600 ? "(h:mm:ss)" : "(mm:ss)") : "(s)");
  if (x0 > 0) x_label += ", axis from " + format_duration(x0) + ": the initial phase before it is left out";
  s += fmt::format("<text class=\"axis-label\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", left + pw / 2,
                   height - 10, esc(x_label));
  s += fmt::format("<text class=\"axis-label\" x=\"16\" y=\"{0:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 16 "
                   "{0:.1f})\">time (ms)</text>\n",
                   top + ph / 2);
  if (c.markers.empty())
    s += fmt::format("<text class=\"no-data\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">no candidates</text>\n",
                     left + pw / 2, top + ph / 2);
  if (c.reference_y && std::isfinite(*c.reference_y) && *c.reference_y > 0)
    s += fmt::format("<line class=\"reference\" x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\"><title>starting kernel "
                     "{3}</title></line>\n<text class=\"reference-label\" x=\"{4}\" y=\"{5:.1f}\" "
                     "text-anchor=\"end\">starting kernel</text>\n",
                     left, Y(*c.reference_y), left + pw, esc(format_ms(*c.reference_y)), left + pw - 4,
                     Y(*c.reference_y) - 4);
  for (const auto& m : c.markers) {
    if (!std::isfinite(m.x)) continue;
    const double x = X(m.x);
    if (m.failed || !m.y || !std::isfinite(*m.y)) {
      const double y = top + ph - 6;
      s += fmt::format("<path class=\"fail\" d=\"M{:.1f} {:.1f}l8 8M{:.1f} {:.1f}l-8 8\"><title>{}</title></path>\n",
                       x - 4, y - 4, x + 4, y - 4, esc(m.label));
    } else if (*m.y > ymax) {
      s += fmt::format("<path class=\"point clipped\" d=\"M{:.1f} {}l4 7h-8z\"><title>{}</title></path>\n", x, top,
                       esc(m.label));
    } else {
      s += fmt::format("<circle class=\"point\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\"><title>{}</title></circle>\n", x,
                       Y(*m.y), esc(m.label));
    }
  }
  if (!c.best.empty()) {
    // Points left of the axis collapse onto its left edge with the value they had there.
    std::size_t first = 0;
    while (first + 1 < c.best.size() && c.best[first + 1].first <= x0) ++first;
    std::string d = fmt::format("M{:.1f} {:.1f}", X(c.best[first].first), Y(c.best[first].second));
    for (std::size_t i = first + 1; i < c.best.size(); ++i)
      d += fmt::format("H{:.1f}V{:.1f}", X(c.best[i].first), Y(c.best[i].second));
    d += fmt::format("H{:.1f}", left + pw);
    s += fmt::format("<path class=\"best\" d=\"{}\"><title>best so far</title></path>\n", d);
  }
  return s + "</svg>\n";
}

std::string render_roofline_svg(const std::vector<roofline_row>& rows, int width) {
  const double left = 150, right = 60, top = 44, row_h = 22, bottom = 40;
  const double pw = width - left - right;
  const int height = static_cast<int>(top + bottom + row_h * static_cast<double>(std::max<std::size_t>(rows.size(), 2)));
  const double ph = height - top - bottom;
  std::string s = fmt::format(
      "<svg class=\"chart roofline\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" role=\"img\" "
      "aria-label=\"Distance to the roofline\">\n<text x=\"{2}\" y=\"20\" class=\"chart-title\">Distance to the "
      "roofline (verified kernels, fastest first)</text>\n",
      width, height, left);
  s += fmt::format("<rect class=\"legend-sol\" x=\"{0}\" y=\"28\" width=\"10\" height=\"8\"/><text class=\"tick\" x=\"{1}\" "
                   "y=\"36\">% of peak (SOL)</text><rect class=\"legend-floor\" x=\"{2}\" y=\"28\" width=\"10\" "
                   "height=\"8\"/><text class=\"tick\" x=\"{3}\" y=\"36\">% of the hardware floor</text>\n",
                   left, left + 14, left + 130, left + 144);
  double xmax = 100;
  for (const auto& r : rows)
    for (const auto& v : {r.sol_pct, r.floor_pct})
      if (v && std::isfinite(*v)) xmax = std::max(xmax, std::min(*v, 150.0));
  const auto xt = nice_ticks(xmax, 5);
  xmax = xt.back();
  auto X = [&](double v) { return left + std::clamp(v, 0.0, xmax) / xmax * pw; };
  for (double t : xt)
    s += fmt::format("<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\"/><text class=\"tick\" "
                     "x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4:g}%</text>\n",
                     X(t), top, top + ph, top + ph + 16, t);
  s += fmt::format("<line class=\"roof\" x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\"><title>100 %: at the "
                   "limit</title></line>\n",
                   X(100), top - 4, top + ph);
  s += fmt::format("<rect class=\"frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\n", left, top, pw, ph);
  if (rows.empty())
    s += fmt::format("<text class=\"no-data\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">no profile data</text>\n",
                     left + pw / 2, top + ph / 2 + 5);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    const double y = top + row_h * static_cast<double>(i);
    const std::string label = fmt::format("<text class=\"row-label\" x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>",
                                          left - 6, y + 15, esc(one_line(r.id, 22)));
    s += "<g class=\"kernel-row\">";
    if (!r.tooltip.empty()) s += "<title>" + esc(r.tooltip) + "</title>";
    s += r.anchor.empty() ? label : "<a href=\"#" + esc(r.anchor) + "\">" + label + "</a>";
    auto bar = [&](const std::optional<double>& v, const char* cls, double dy, const char* what) {
      if (!v || !std::isfinite(*v)) return;
      s += fmt::format("<rect class=\"{}\" x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"8\"><title>{}: {:.1f}% {}"
                       "</title></rect>",
                       cls, left, y + dy, std::max(0.5, X(*v) - left), esc(r.id), *v, what);
      s += fmt::format("<text class=\"bar-value\" x=\"{:.1f}\" y=\"{:.1f}\">{:.1f}</text>", X(*v) + 3, y + dy + 8, *v);
    };
    bar(r.sol_pct, "bar-sol", 3, "of peak");
    bar(r.floor_pct, "bar-floor", 12, "of the hardware floor");
    s += "</g>\n";
  }
  return s + "</svg>\n";
}

} // namespace kagent::report
