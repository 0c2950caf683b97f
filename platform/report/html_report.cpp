#include "platform/report/html_report.hpp"

#include "platform/common/failure_kind.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <unordered_map>
#include <optional>
#include <set>

#include "platform/common/errors.hpp"
#include "platform/report/line_diff.hpp"
#include "platform/report/program_tree.hpp"
#include "platform/report/progress.hpp"
#include "platform/report/run_charts.hpp"
#include "platform/report/summary_table.hpp"
#include "platform/report/svg_chart.hpp"
#include "platform/report/text.hpp"
#include "platform/store/event_log.hpp"
#include "platform/store/sessions.hpp"
#include "platform/store/util.hpp"
#include "platform/common/files.hpp"

namespace kagent::report {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t max_diff_lines = 4000;
constexpr std::size_t max_failure_rows = 300;

std::string e(std::string_view s) { return html_escape(s); }

std::optional<double> time_of(const store::program_record& p) {
  if (p.time_ms && std::isfinite(*p.time_ms) && *p.time_ms > 0) return p.time_ms;
  return std::nullopt;
}

const store::program_record* find_program(const std::vector<store::program_record>& ps, const std::string& id) {
  for (const auto& p : ps)
    if (p.id == id) return &p;
  return nullptr;
}

/// The starting kernel: "initial", else the first program of round 0 / without a parent.
const store::program_record* starting_program(const report_data& d) {
  if (auto* p = find_program(d.programs, "initial")) return p;
  for (const auto& p : d.programs)
    if (p.round == 0 || !p.parent_id) return &p;
  return nullptr;
}

std::optional<double> initial_ms_of(const report_data& d) {
  if (auto v = positive_ms(d.summary, "initial_ms")) return v;
  for (const auto& ev : d.events)
    if (text_of(ev, "type") == "initial")
      if (auto v = positive_ms(ev, "initial_ms")) return v;
  if (auto* p = starting_program(d)) return time_of(*p);
  return std::nullopt;
}

// ---- timeline ------------------------------------------------------------------------------------

struct timeline_point {
  double t_s = 0;  ///< seconds since the run started
  int index = 0;   ///< 1-based completion order
  std::string id, cause;
  bool ok = false;
  std::optional<double> time_ms;
  std::optional<double> best_ms;  ///< best so far after this candidate
};

struct timeline {
  std::optional<double> initial_ms;
  double initial_t_s = 0;
  std::vector<std::pair<std::string, double>> round_starts;  ///< ("r1", t) per round_start event
  std::optional<double> first_candidate_t_s;                 ///< first candidate_start (async runs)
  double end_t_s = 0;                                        ///< the latest event
  std::vector<timeline_point> points;
  std::string source;  ///< "events.jsonl" or "program.db"
};

timeline build_timeline(const report_data& d) {
  timeline tl;
  tl.initial_ms = initial_ms_of(d);
  // Time zero: the run_start event, else the first event with a time.
  std::optional<double> t0;
  for (const auto& ev : d.events) {
    auto t = parse_iso_utc(text_of(ev, "ts"));
    if (!t) continue;
    if (!t0) t0 = t;
    if (text_of(ev, "type") == "run_start") {
      t0 = t;
      break;
    }
  }
  std::optional<double> best = tl.initial_ms;
  // A resumed run's sessions follow each other on the time axis: the time the run was not running
  // (between a session's last event and the next run_start) is left out, and the resume is marked.
  double gap = 0;
  std::optional<double> last_abs;
  bool seen_start = false, seen_initial = false;
  for (const auto& ev : d.events) {
    const auto type = text_of(ev, "type");
    const auto abs = parse_iso_utc(text_of(ev, "ts"));
    if (type == "run_start" && abs) {
      if (seen_start && last_abs && *abs > *last_abs) gap += *abs - *last_abs;
      seen_start = true;
    }
    if (abs && (!last_abs || *abs > *last_abs)) last_abs = abs;
    const double t = t0 ? std::max(0.0, abs.value_or(*t0) - *t0 - gap) : 0;
    if (type == "resume") tl.round_starts.emplace_back("resumed", t);
    if (type == "initial" && !seen_initial) tl.initial_t_s = t, seen_initial = true;
    tl.end_t_s = std::max(tl.end_t_s, t);
    if (type == "round_start") tl.round_starts.emplace_back("r" + text_of(ev, "round"), t);
    if (type == "candidate_start" && !tl.first_candidate_t_s) tl.first_candidate_t_s = t;
    if (type != "candidate_result") continue;
    timeline_point p;
    p.t_s = t;
    p.index = static_cast<int>(tl.points.size()) + 1;
    p.id = text_of(ev, "candidate_id");
    p.ok = ev.contains("ok") && ev["ok"].is_boolean() && ev["ok"].get<bool>();
    p.cause = text_of(ev, "failure_cause");
    if (p.ok) p.time_ms = positive_ms(ev, "time_ms");
    if (p.time_ms && (!best || *p.time_ms < *best)) best = p.time_ms;
    if (auto b = positive_ms(ev, "best_ms"); b && (!best || *b < *best)) best = b;
    p.best_ms = best;
    tl.points.push_back(p);
  }
  if (!tl.points.empty()) {
    tl.source = "events.jsonl";
    return tl;
  }
  // No events (or none with results): the candidates as the database has them, by creation time.
  std::optional<double> db_t0;
  for (const auto& p : d.programs)
    if (auto t = parse_iso_utc(p.created_at); t && (!db_t0 || *t < *db_t0)) db_t0 = t;
  for (const auto& pr : d.programs) {
    if (pr.round == 0 || pr.status == store::program_status::pending) continue;
    timeline_point p;
    p.t_s = db_t0 ? std::max(0.0, parse_iso_utc(pr.created_at).value_or(*db_t0) - *db_t0) : 0;
    p.index = static_cast<int>(tl.points.size()) + 1;
    p.id = pr.id;
    p.ok = pr.status == store::program_status::verified;
    p.cause = pr.failure_cause.value_or("");
    if (p.ok) p.time_ms = time_of(pr);
    if (p.time_ms && (!best || *p.time_ms < *best)) best = p.time_ms;
    p.best_ms = best;
    tl.points.push_back(p);
  }
  if (!tl.points.empty()) tl.source = "program.db (creation times)";
  return tl;
}

step_chart make_chart(const timeline& tl, bool by_time) {
  step_chart c;
  c.title = by_time ? "Best time over wall-clock time" : "Best time over candidates";
  c.x_label = by_time ? "wall-clock time since start" : "candidates finished";
  c.y_label = "time (ms)";
  c.x_is_seconds = by_time;
  c.x_integer = !by_time;
  c.reference_y = tl.initial_ms;
  std::optional<double> last;
  if (tl.initial_ms) {
    c.best.emplace_back(by_time ? tl.initial_t_s : 0.0, *tl.initial_ms);
    last = tl.initial_ms;
  }
  for (const auto& p : tl.points) {
    const double x = by_time ? p.t_s : p.index;
    std::string label = p.id.empty() ? "candidate" : p.id;
    label += p.ok ? ": " + format_ms(p.time_ms) : ": failed (" + (p.cause.empty() ? std::string("unknown") : p.cause) + ")";
    c.markers.push_back({x, p.time_ms, !p.ok, label});
    if (p.best_ms && (!last || *p.best_ms != *last)) {
      c.best.emplace_back(x, *p.best_ms);
      last = p.best_ms;
    }
  }
  std::stable_sort(c.best.begin(), c.best.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return c;
}

// ---- page pieces -----------------------------------------------------------------------------

const char* css = R"(
body { font-family: -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; margin: 24px auto;
       max-width: 1180px; color: #1d2330; background: #fff; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #dde1e8; padding-bottom: 4px; }
.meta { color: #566075; font-size: 13px; }
.status-ok { color: #11743a; font-weight: 600; } .status-failed { color: #b3261e; font-weight: 600; }
.status-interrupted { color: #8a5a00; font-weight: 600; }
table { border-collapse: collapse; font-size: 14px; margin: 8px 0; }
th, td { border: 1px solid #dde1e8; padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: #f3f5f9; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.lineage { display: flex; flex-wrap: wrap; align-items: center; gap: 6px; margin: 8px 0 12px; }
.lineage .node { border: 1px solid #9aa6bd; border-radius: 6px; padding: 6px 10px; background: #f7f9fc; font-size: 13px; }
.lineage .node.best { border-color: #11743a; background: #eaf6ee; } .lineage .arrow { color: #566075; }
pre { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12px; background: #f7f8fa;
      border: 1px solid #dde1e8; padding: 8px; overflow-x: auto; line-height: 1.35; }
pre.diff span { display: block; white-space: pre; } .diff .add { background: #e6ffec; color: #116329; }
.diff .del { background: #ffebe9; color: #82071e; } .diff .hunk { color: #0550ae; background: #ddf4ff; }
.diff .file { color: #566075; font-weight: 600; }
svg.chart { display: block; margin: 8px 0; background: #fff; }
svg .chart-title { font-size: 14px; font-weight: 600; fill: #1d2330; }
svg .tick, svg .axis-label, svg .reference-label, svg .no-data { font-size: 11px; fill: #566075; }
svg .no-data { font-size: 14px; } svg .grid { stroke: #eef0f4; stroke-width: 1; }
svg .frame { fill: none; stroke: #9aa6bd; } svg .best { fill: none; stroke: #1f6feb; stroke-width: 2.2; }
svg .reference { stroke: #8a6d00; stroke-dasharray: 6 4; stroke-width: 1.2; }
svg .point { fill: #7d8aa3; fill-opacity: 0.75; } svg .fail { stroke: #d1242f; stroke-width: 1.6; fill: none; }
.note { color: #566075; font-size: 13px; } .problems { color: #b3261e; }
details summary { cursor: pointer; color: #1f4fa3; margin: 6px 0; }
.status-running { color: #0550ae; font-weight: 600; }
nav.toc { font-size: 13px; margin: 6px 0; } nav.toc a { margin-right: 10px; color: #1f4fa3; }
.tree-box { max-height: 80vh; overflow: auto; border: 1px solid #dde1e8; padding: 6px 8px; }
ul.tree, ul.tree ul { list-style: none; margin: 0; padding-left: 0; }
ul.tree ul { margin-left: 10px; padding-left: 12px; border-left: 1px solid #c8cfdb; }
ul.tree li { margin: 2px 0; white-space: nowrap; }
.tnode { display: inline-block; font-size: 12px; padding: 1px 7px; border-radius: 4px; border: 1px solid #b8c0cf;
         text-decoration: none; color: #1d2330; background: #f7f9fc; }
.tnode .t { font-variant-numeric: tabular-nums; } .tnode .st { color: inherit; opacity: 0.85; }
.tnode.verified { background: #eaf6ee; border-color: #8cc9a0; color: #0f5a2e; }
.tnode.failed { background: #ffebe9; border-color: #f1a7a0; color: #b3261e; }
.tnode.duplicate { background: #f0f1f3; border-color: #c9cdd4; color: #6b7280; }
.tnode.pending { background: #fff6dd; border-color: #e3c66f; color: #8a5a00; }
.tnode.diverged { font-style: italic; border-style: dashed; }
.tnode.on-path { outline: 2px solid #1f6feb; outline-offset: 1px; font-weight: 600; }
.tnode .badge { background: #1f6feb; color: #fff; border-radius: 3px; padding: 0 4px; font-size: 11px; }
details.cand { border-top: 1px solid #eef0f4; padding: 2px 0; } details.cand > summary { color: #1d2330; }
details.cand .meta { margin-left: 6px; }
.cand-body { margin: 4px 0 12px 18px; } .cand-body table.facts th { width: 220px; }
.direction { font-size: 13px; } pre.error { background: #fff5f4; border-color: #f1c4bf; }
pre.file-text { white-space: pre-wrap; max-height: 480px; overflow: auto; }
details.file summary { color: #1f4fa3; font-size: 13px; }
svg .phase-initial { fill: #eceef3; } svg .phase-a { fill: #f6f8fc; } svg .phase-b { fill: #fdfdfe; }
svg .phase-line { stroke: #b8c0cf; stroke-dasharray: 2 3; } svg .phase-label { font-size: 10px; fill: #566075; }
svg .bar-sol, svg .legend-sol { fill: #1f6feb; } svg .bar-floor, svg .legend-floor { fill: #2da44e; }
svg .roof { stroke: #b3261e; stroke-width: 1.5; stroke-dasharray: 4 3; }
svg .row-label { font-size: 11px; fill: #1f4fa3; } svg .bar-value { font-size: 10px; fill: #566075; }
)";

std::string diff_html(const std::string& old_code, const std::string& new_code, const std::string& old_label,
                      const std::string& new_label, std::size_t max_lines);

std::string td(const std::string& text, bool num = false) {
  return std::string(num ? "<td class=\"num\">" : "<td>") + e(text) + "</td>";
}

/// The achieved share of the physics floor (bytes over peak bandwidth / measured time), "" if unknown.
std::string floor_cell(const store::program_record& p) {
  return p.floor_pct && std::isfinite(*p.floor_pct) ? fmt::format("{:.1f}", *p.floor_pct) : "";
}

std::string summary_section(const summary_view& v, const report_data& d) {
  std::string s = "<h2 id=\"summary\">Summary</h2>\n<table class=\"summary\">\n";
  s += "<tr><th></th><th>time</th><th>speed-up of the best kernel</th></tr>\n";
  for (const auto& r : v.timings) {
    std::string label = r.label;
    if (label == "best kernel" && !v.best_program_id.empty()) label += " (" + v.best_program_id + ")";
    s += "<tr>" + td(label) + td(r.time, true) + td(r.speedup, true) + "</tr>\n";
  }
  s += "</table>\n<table class=\"counts\">\n";
  auto row = [&](const std::string& k, const std::string& val) { s += "<tr><th>" + e(k) + "</th>" + td(val) + "</tr>\n"; };
  row("rounds", v.rounds);
  row("candidates", v.candidates);
  row("verified", v.verified);
  row("failed", v.failed);
  std::vector<std::string> causes;
  for (const auto& [c, n] : v.failures_by_cause) causes.push_back(c + "=" + n);
  row("failures by cause", causes.empty() ? "none" : fmt::format("{}", fmt::join(causes, ", ")));
  row("LLM", fmt::format("{} calls ({} failed), {} tokens in, {} tokens out, est. {}", v.llm_calls, v.llm_failed_calls,
                         v.llm_tokens_in, v.llm_tokens_out, v.llm_cost));
  row("devices in synthetic mode", v.synthetic_devices.empty() ? "none" : fmt::format("{}", fmt::join(v.synthetic_devices, ", ")));
  row("wall time", v.wall_time);
  // GPU busy: device seconds of all candidates over wall time x devices.
  double device_s = 0;
  bool have = false;
  for (const auto& ev : d.events)
    if (const auto type = text_of(ev, "type"); type == "candidate_result" || type == "analysis")
      if (auto x = finite_number(ev, "device_s"); x && *x >= 0) device_s += *x, have = true;
  const auto wall = finite_number(d.summary, "wall_s");
  std::size_t devices = 1;
  if (d.summary.contains("devices") && d.summary["devices"].is_array() && !d.summary["devices"].empty())
    devices = d.summary["devices"].size();
  // summary.json's own figure, where it has one, covers every session of a resumed run.
  const auto busy = finite_number(d.summary, "gpu_busy_pct");
  if (auto ds = finite_number(d.summary, "device_s"); busy && ds) device_s = *ds, have = true;
  const auto sessions = int_or(d.summary, "sessions", 1);
  // Without summary.json's figure (a run still going), from the events and this session's wall time.
  const auto from_events = have && wall ? store::busy_pct(device_s, *wall * static_cast<double>(devices)) : std::nullopt;
  // Of those device seconds, the kernel directory's own test.py runs (user_test).
  const std::string of_test =
      v.user_test_s ? fmt::format("; the kernel directory's test.py {:.1f} s of it", *v.user_test_s) : "";
  row("GPU busy", busy && have ? fmt::format("{:.0f}% ({:.1f} device-s over {} device(s){}{})", *busy, device_s, devices,
                                             sessions > 1 ? fmt::format(", {} sessions", sessions) : "", of_test)
                  : from_events ? fmt::format("{:.0f}% ({:.1f} device-s over {} device(s))", *from_events, device_s, devices)
                                : "n/a");
  row("best kernel file", v.best_kernel_path.empty() ? "(none)" : v.best_kernel_path);
  row("run directory", v.run_dir.empty() ? "n/a" : v.run_dir);
  s += "</table>\n";
  return s;
}

std::string lineage_section(const report_data& d, const std::string& best_id, std::optional<double> initial_ms) {
  std::string s = "<h2 id=\"lineage\">Lineage of the best kernel</h2>\n";
  if (best_id.empty()) return s + "<p class=\"note\">No verified kernel: there is no best kernel to trace.</p>\n";
  if (!d.have_db) return s + "<p class=\"note\">program.db could not be read: the lineage of " + e(best_id) + " is not known.</p>\n";
  const auto chain = lineage(d.programs, best_id);
  if (chain.empty()) return s + "<p class=\"note\">" + e(best_id) + " is not in program.db.</p>\n";
  s += "<div class=\"lineage\">";
  for (std::size_t i = 0; i < chain.size(); ++i) {
    const auto& p = chain[i];
    if (i > 0) s += "<span class=\"arrow\">&rarr;</span>";
    s += fmt::format("<span class=\"node{}\"><b>{}</b><br>{} &middot; {}</span>", i + 1 == chain.size() ? " best" : "",
                     e(p.id), e(format_ms(time_of(p))), e(format_speedup(initial_ms, time_of(p))));
  }
  s += "</div>\n<table class=\"lineage-table\"><tr><th>#</th><th>program</th><th>round</th><th>time</th>"
       "<th>speed-up vs start</th><th>vs parent</th><th>bottleneck targeted</th><th>model</th><th>SOL %</th>"
       "<th>% of hardware floor</th></tr>\n";
  std::optional<double> parent_t;
  for (std::size_t i = 0; i < chain.size(); ++i) {
    const auto& p = chain[i];
    const auto t = time_of(p);
    s += "<tr>" + td(std::to_string(i), true) + td(p.id) + td(std::to_string(p.round), true) + td(format_ms(t), true) +
         td(format_speedup(initial_ms, t), true) + td(i == 0 ? "" : format_speedup(parent_t, t), true) +
         td(p.bottleneck.value_or("")) + td(p.model.value_or("")) +
         td(p.sol_pct && std::isfinite(*p.sol_pct) ? fmt::format("{:.1f}", *p.sol_pct) : "", true) +
         td(floor_cell(p), true) + "</tr>\n";
    parent_t = t;
  }
  return s + "</table>\n";
}

std::string diff_section(const report_data& d, const std::string& best_id) {
  std::string s = "<h2 id=\"diff\">Best kernel against the starting kernel</h2>\n";
  const auto* start = starting_program(d);
  const auto* best = best_id.empty() ? nullptr : find_program(d.programs, best_id);
  if (!best) return s + "<p class=\"note\">No best kernel: nothing to compare.</p>\n";
  if (!start) return s + "<p class=\"note\">The starting kernel is not in program.db.</p>\n";
  if (start->id == best->id || start->code == best->code)
    return s + "<p class=\"note\">The best kernel is the starting kernel: no change.</p>\n";
  s += diff_html(start->code, best->code, start->id, best->id, max_diff_lines);
  s += "<details><summary>Full best kernel (" + e(best->id) + ")</summary><pre class=\"code\">" + e(best->code) +
       "</pre></details>\n";
  return s;
}

std::string top_section(const report_data& d, std::optional<double> initial_ms, const std::set<std::string>& diverged) {
  std::vector<const store::program_record*> verified;
  std::size_t left_out = 0;
  for (const auto& p : d.programs)
    if (p.status == store::program_status::verified && time_of(p)) {
      if (diverged.count(p.id)) ++left_out;
      else verified.push_back(&p);
    }
  std::stable_sort(verified.begin(), verified.end(), [](auto* a, auto* b) { return *a->time_ms < *b->time_ms; });
  std::string s = "<h2 id=\"top\">Fastest verified kernels</h2>\n";
  const auto summary_diverged = int_or(d.summary, "diverged", 0);
  if (left_out > 0)
    s += fmt::format("<p class=\"note\">{} diverged kernel(s) left out: verified, but so much slower than their parent "
                     "that the search did not build on them.</p>\n",
                     left_out);
  else if (summary_diverged > 0)
    s += fmt::format("<p class=\"note\">The summary counts {} diverged kernel(s), but program.db does not say which: "
                     "this list may hold them.</p>\n",
                     summary_diverged);
  if (verified.empty()) return s + "<p class=\"note\">None.</p>\n";
  s += "<table><tr><th>program</th><th>parent</th><th>round</th><th>gpu</th><th>time</th><th>speed-up vs start</th>"
       "<th>bottleneck</th><th>analysis</th><th title=\"bytes moved over the peak memory bandwidth, as a share of the "
       "measured time (100: at the hardware limit)\">% of hardware floor</th></tr>\n";
  for (std::size_t i = 0; i < verified.size() && i < 10; ++i) {
    const auto& p = *verified[i];
    s += "<tr><td><a href=\"#" + e(candidate_anchor(p.id)) + "\">" + e(p.id) + "</a></td>" + td(p.parent_id.value_or("")) + td(std::to_string(p.round), true) +
         td(p.gpu_id ? std::to_string(*p.gpu_id) : "", true) + td(format_ms(time_of(p)), true) +
         td(format_speedup(initial_ms, time_of(p)), true) + td(p.bottleneck.value_or("")) +
         td(p.analysis_mode.value_or("")) + td(floor_cell(p), true) + "</tr>\n";
  }
  return s + "</table>\n";
}

std::string failures_section(const report_data& d, const summary_view& v) {
  std::string s = "<h2 id=\"failures\">Failures by cause</h2>\n";
  std::vector<std::pair<std::string, std::string>> causes;
  if (d.have_db)
    for (const auto& [c, n] : d.failures_by_cause) causes.emplace_back(c, std::to_string(n));
  else
    causes = v.failures_by_cause;
  if (causes.empty()) return s + "<p class=\"note\">No failed candidates.</p>\n";
  s += "<table><tr><th>cause</th><th>candidates</th></tr>\n";
  for (const auto& [c, n] : causes) s += "<tr>" + td(c) + td(n, true) + "</tr>\n";
  s += "</table>\n";
  std::vector<const store::program_record*> failed;
  for (const auto& p : d.programs)
    if (p.status == store::program_status::failed) failed.push_back(&p);
  if (failed.empty()) return s;
  s += fmt::format("<details><summary>{} failed candidate(s)</summary><table><tr><th>program</th><th>round</th>"
                   "<th>gpu</th><th>cause</th><th>error</th></tr>\n",
                   failed.size());
  for (std::size_t i = 0; i < failed.size() && i < max_failure_rows; ++i) {
    const auto& p = *failed[i];
    s += "<tr>" + td(p.id) + td(std::to_string(p.round), true) + td(p.gpu_id ? std::to_string(*p.gpu_id) : "", true) +
         td(p.failure_cause.value_or("unknown")) + td(one_line(p.error.value_or(""), 300)) + "</tr>\n";
  }
  s += "</table>";
  if (failed.size() > max_failure_rows) s += fmt::format("<p class=\"note\">First {} shown.</p>", max_failure_rows);
  return s + "</details>\n";
}

std::string llm_section(const report_data& d) {
  std::string s = "<h2 id=\"llm\">LLM usage</h2>\n";
  struct row { std::string purpose, model; std::int64_t calls = 0, failed = -1, tin = 0, tout = 0; double cost = 0; };
  std::vector<row> rows;
  if (d.have_db) {
    for (const auto& u : d.llm_usage)
      rows.push_back({u.purpose, u.model, u.calls, u.failed_calls, u.tokens_in, u.tokens_out, u.cost_usd});
  } else if (d.summary.contains("llm") && d.summary["llm"].is_object() &&
             d.summary["llm"].contains("by_purpose_and_model") && d.summary["llm"]["by_purpose_and_model"].is_array()) {
    for (const auto& u : d.summary["llm"]["by_purpose_and_model"])
      rows.push_back({text_of(u, "purpose"), text_of(u, "model"), int_or(u, "calls", 0), int_or(u, "failed_calls", -1),
                      int_or(u, "tokens_in", 0), int_or(u, "tokens_out", 0), finite_number(u, "cost_usd").value_or(0)});
  }
  if (rows.empty()) return s + "<p class=\"note\">No LLM calls recorded.</p>\n";
  s += "<p class=\"note\">By purpose and model:</p>\n";
  s += "<table><tr><th>purpose</th><th>model</th><th>calls</th><th>failed</th><th>tokens in</th><th>tokens out</th>"
       "<th>est. cost</th></tr>\n";
  row total{"total", "", 0, 0, 0, 0, 0};
  for (const auto& r : rows) {
    s += "<tr>" + td(r.purpose) + td(r.model) + td(std::to_string(r.calls), true) +
         td(r.failed >= 0 ? std::to_string(r.failed) : "n/a", true) + td(std::to_string(r.tin), true) +
         td(std::to_string(r.tout), true) + td(format_usd(r.cost), true) + "</tr>\n";
    total.calls += r.calls, total.failed += std::max<std::int64_t>(0, r.failed), total.tin += r.tin,
        total.tout += r.tout, total.cost += r.cost;
  }
  s += "<tr><th>total</th><th></th>" + td(std::to_string(total.calls), true) + td(std::to_string(total.failed), true) +
       td(std::to_string(total.tin), true) + td(std::to_string(total.tout), true) + td(format_usd(total.cost), true) +
       "</tr>\n</table>\n";
  // The same per model, all purposes together.
  std::map<std::string, row> by_model;
  for (const auto& r : rows) {
    auto& m = by_model[r.model];
    m.model = r.model;
    if (r.failed >= 0) m.failed = std::max<std::int64_t>(0, m.failed) + r.failed;
    m.calls += r.calls, m.tin += r.tin, m.tout += r.tout, m.cost += r.cost;
  }
  s += "<p class=\"note\">By model:</p>\n<table class=\"llm-by-model\"><tr><th>model</th><th>calls</th><th>failed</th><th>tokens in</th>"
       "<th>tokens out</th><th>est. cost</th><th>share of cost</th></tr>\n";
  for (const auto& [name, m] : by_model)
    s += "<tr>" + td(name.empty() ? "(unknown)" : name) + td(std::to_string(m.calls), true) +
         td(m.failed >= 0 ? std::to_string(m.failed) : "n/a", true) + td(std::to_string(m.tin), true) +
         td(std::to_string(m.tout), true) + td(format_usd(m.cost), true) +
         td(total.cost > 0 ? fmt::format("{:.0f}%", m.cost / total.cost * 100) : "n/a", true) + "</tr>\n";
  return s + "</table>\n";
}

std::string events_section(const report_data& d) {
  static const std::set<std::string> notable{"run_start", "initial", "start_checked", "mode_change", "profiling_failed", "error",
                                             "note", "resume", "run_end"};
  std::string s = "<h2 id=\"events\">Notable events</h2>\n";
  progress_state st;
  std::optional<double> t0;
  std::vector<std::string> lines;
  for (const auto& ev : d.events) {
    const auto type = text_of(ev, "type");
    const auto t = parse_iso_utc(text_of(ev, "ts"));
    if (!t0 && t) t0 = t;
    const double rel = t && t0 ? *t - *t0 : st.t_last_s < 0 ? 0 : st.t_last_s;
    update(st, type, ev, rel);
    if (!notable.count(type)) continue;
    if (auto line = format_log_line(st, type, ev, rel)) lines.push_back(*line);
  }
  if (lines.empty()) return s + "<p class=\"note\">None recorded.</p>\n";
  s += "<pre class=\"events\">";
  for (const auto& l : lines) s += e(l) + "\n";
  return s + "</pre>\n";
}


// ---- run state, spreads, profiles ------------------------------------------------------------

bool is_duplicate(const store::program_record& p) {
  return p.status == store::program_status::failed && parse_failure_kind(p.failure_cause.value_or("")) == failure_kind::duplicate;
}

/// Spread of each candidate's time (IQR relative to the median, in %) when its result event names one.
std::map<std::string, double> spreads_of(const report_data& d) {
  std::map<std::string, double> out;
  for (const auto& ev : d.events) {
    if (text_of(ev, "type") != "candidate_result") continue;
    const auto id = text_of(ev, "candidate_id");
    if (id.empty()) continue;
    std::optional<double> pct = finite_number(ev, "time_spread_pct");
    if (!pct) pct = finite_number(ev, "spread_pct");
    if (!pct)
      if (auto r = finite_number(ev, "iqr_rel")) pct = *r * 100;
    if (!pct)
      if (auto iqr = finite_number(ev, "iqr_ms"); iqr && positive_ms(ev, "time_ms")) pct = *iqr / *positive_ms(ev, "time_ms") * 100;
    if (pct && *pct >= 0) out[id] = *pct;
  }
  return out;
}

/// "1.500 ms (IQR 2.1%)", or the time alone when no spread is known.
std::string time_with_spread(std::optional<double> t, const std::map<std::string, double>& spreads, const std::string& id) {
  if (!t) return "n/a";
  auto it = spreads.find(id);
  return it == spreads.end() ? format_ms(t) : fmt::format("{} (IQR {:.1f}%)", format_ms(t), it->second);
}

/// The roofline object of a program's profile: run_state profile:<id>, else candidates/<id>/sol_profile.json.
nlohmann::json roofline_of(const report_data& d, const std::string& id) {
  auto take = [](const std::string& text) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_object() && j.contains("roofline") && j["roofline"].is_object()) return j["roofline"];
    return nlohmann::json(nullptr);
  };
  if (auto it = d.state.find(std::string{store::state_key::profile_prefix} + id); it != d.state.end())
    if (auto r = take(it->second); r.is_object()) return r;
  if (auto it = d.candidate_files.find(id); it != d.candidate_files.end())
    for (const auto& f : it->second)
      if (f.name == "sol_profile.json" && !f.truncated && !f.left_out)
        if (auto r = take(f.text); r.is_object()) return r;
  return nullptr;
}

std::optional<double> pct_of(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? v : std::nullopt;
}

/// Share of the peak: the program's combined SOL %, else its profile's efficiency_pct.
std::optional<double> sol_of(const report_data& d, const store::program_record& p) {
  if (auto v = pct_of(p.sol_pct)) return v;
  return finite_number(roofline_of(d, p.id), "efficiency_pct");
}

std::string pct_text(std::optional<double> v) { return v ? fmt::format("{:.1f}%", *v) : "n/a"; }

// ---- search tree -----------------------------------------------------------------------------

struct tree_context {
  const report_data& d;
  const program_tree& tree;
  std::set<std::string> best_path;
  std::set<std::string> diverged;
  std::map<std::string, double> spreads;
  std::string best_id;
};

std::string status_class(const store::program_record& p) {
  if (is_duplicate(p)) return "duplicate";
  if (p.status == store::program_status::verified) return "verified";
  if (p.status == store::program_status::failed) return "failed";
  if (p.status == store::program_status::pending) return "pending";
  return "unknown";
}

/// The one-line state of a program: "verified", "failed: timeout", "duplicate of r2_c1", ...
std::string status_text(const store::program_record& p, const std::set<std::string>& diverged) {
  if (is_duplicate(p)) {
    const auto err = p.error.value_or("");
    const std::string prefix = "same compiled code as ";
    return err.rfind(prefix, 0) == 0 ? "duplicate of " + err.substr(prefix.size()) : "duplicate";
  }
  if (p.status == store::program_status::failed) return "failed: " + p.failure_cause.value_or("unknown");
  if (p.status == store::program_status::verified) return diverged.count(p.id) ? "verified, diverged" : "verified";
  if (p.status == store::program_status::pending) return "pending (no result yet)";
  return p.status;
}

std::string node_html(const tree_context& c, const store::program_record& p) {
  std::string cls = "tnode " + status_class(p);
  if (c.best_path.count(p.id)) cls += " on-path";
  if (p.id == c.best_id) cls += " best";
  if (c.diverged.count(p.id)) cls += " diverged";
  std::string s = "<a class=\"" + cls + "\" href=\"#" + e(candidate_anchor(p.id)) + "\"><b>" + e(p.id) + "</b>";
  const auto t = time_of(p);
  if (t) s += " <span class=\"t\">" + e(time_with_spread(t, c.spreads, p.id)) + "</span>";
  s += " <span class=\"st\">" + e(one_line(status_text(p, c.diverged), 80)) + "</span>";
  if (p.id == c.best_id) s += " <span class=\"badge\">best</span>";
  return s + "</a>";
}

void tree_items(std::string& s, const tree_context& c, const std::vector<std::size_t>& items) {
  for (auto i : items) {
    const auto& p = c.d.programs[i];
    s += "<li>" + node_html(c, p);
    if (!c.tree.children[i].empty()) {
      s += "<ul>";
      tree_items(s, c, c.tree.children[i]);
      s += "</ul>";
    }
    s += "</li>\n";
  }
}

std::string tree_section(const tree_context& c) {
  std::string s = "<h2 id=\"tree\">Search tree</h2>\n";
  if (!c.d.have_db) return s + "<p class=\"note\">program.db could not be read: the search tree is not known.</p>\n";
  if (c.d.programs.empty()) return s + "<p class=\"note\">No programs recorded.</p>\n";
  std::map<std::string, int> by_class;
  for (const auto& p : c.d.programs) ++by_class[status_class(p)];
  std::vector<std::string> counts;
  for (const auto& [k, n] : by_class) counts.push_back(fmt::format("{} {}", n, k));
  s += fmt::format("<p class=\"note\">{} program(s): {}. Each program sits under the kernel it was derived from; "
                   "the path to the best kernel is outlined in blue. <span class=\"tnode verified\">verified</span> "
                   "<span class=\"tnode failed\">failed (cause)</span> <span class=\"tnode duplicate\">duplicate</span> "
                   "<span class=\"tnode pending\">pending</span> <span class=\"tnode verified diverged\">diverged</span>. "
                   "Times are medians, with their interquartile range when the run recorded it. A node links to the "
                   "candidate's details.</p>\n",
                   c.d.programs.size(), e(fmt::format("{}", fmt::join(counts, ", "))));
  s += "<div class=\"tree-box\"><ul class=\"tree\">\n";
  tree_items(s, c, c.tree.roots);
  return s + "</ul></div>\n";
}

// ---- candidate details -----------------------------------------------------------------------

/// A unified diff of two texts as <pre class="diff"> with a count line; `max_lines` diff lines at most.
std::string diff_html(const std::string& old_code, const std::string& new_code, const std::string& old_label,
                      const std::string& new_label, std::size_t max_lines) {
  const auto diff = line_diff(split_lines(old_code), split_lines(new_code));
  const auto hunks = unified_hunks(diff, 3);
  int added = 0, removed = 0;
  for (const auto& l : diff) added += l.op == diff_op::add, removed += l.op == diff_op::remove;
  std::string s = fmt::format("<p class=\"note\">{} line(s) removed, {} added.</p>\n<pre class=\"diff\">", removed, added);
  s += "<span class=\"file\">--- " + e(old_label) + "</span><span class=\"file\">+++ " + e(new_label) + "</span>";
  std::size_t shown = 0;
  bool cut = false;
  for (const auto& h : hunks) {
    if (shown >= max_lines) {
      cut = true;
      break;
    }
    s += "<span class=\"hunk\">" + e(h.header()) + "</span>";
    for (const auto& l : h.lines) {
      if (shown++ >= max_lines) {
        cut = true;
        break;
      }
      const char* cls = l.op == diff_op::add ? "add" : l.op == diff_op::remove ? "del" : "ctx";
      const char mark = l.op == diff_op::add ? '+' : l.op == diff_op::remove ? '-' : ' ';
      s += fmt::format("<span class=\"{}\">{}{}</span>", cls, mark, e(l.text));
    }
  }
  s += "</pre>\n";
  if (cut) s += fmt::format("<p class=\"note\">Diff cut after {} lines.</p>\n", max_lines);
  return s;
}

std::string file_size_text(std::uintmax_t n) {
  if (n < 1024) return fmt::format("{} B", n);
  if (n < 1024 * 1024) return fmt::format("{:.1f} KB", static_cast<double>(n) / 1024);
  return fmt::format("{:.1f} MB", static_cast<double>(n) / (1024.0 * 1024.0));
}

std::string files_html(const std::string& id, const std::vector<candidate_file>& files) {
  std::string s = "<div class=\"files\"><b>Prompts, replies and logs</b> (candidates/" + e(id) + "/)\n";
  for (const auto& f : files) {
    s += "<details class=\"file\"><summary>" + e(f.name) + " (" + e(file_size_text(f.size)) + ")";
    if (f.left_out) {
      s += "</summary><p class=\"note\">Not included: the page's budget for candidate files is spent. Open the file "
           "in the run directory.</p></details>\n";
      continue;
    }
    if (f.truncated) s += f.from_tail ? ", its last 20 KB" : ", its first 20 KB";
    s += "</summary>";
    if (f.truncated)
      s += fmt::format("<p class=\"note\">Truncated: {} of {} shown ({}); the whole file is in the run directory.</p>",
                       e(file_size_text(f.text.size())), e(file_size_text(f.size)), f.from_tail ? "the end" : "the start");
    s += "<pre class=\"file-text\">" + e(f.text) + "</pre></details>\n";
  }
  return s + "</div>\n";
}

std::string candidate_details(const tree_context& c, const store::program_record& p) {
  const auto& d = c.d;
  const auto t = time_of(p);
  const auto* parent = p.parent_id && !p.parent_id->empty() ? find_program(d.programs, *p.parent_id) : nullptr;
  std::string s = "<details class=\"cand\" id=\"" + e(candidate_anchor(p.id)) + "\"><summary>" + node_html(c, p);
  s += " <span class=\"meta\">round " + std::to_string(p.round);
  if (p.model) s += " &middot; " + e(*p.model);
  if (p.bottleneck) s += " &middot; " + e(*p.bottleneck);
  s += "</span></summary>\n<div class=\"cand-body\">\n<table class=\"facts\">\n";
  auto row = [&](const std::string& k, const std::string& v) { s += "<tr><th>" + e(k) + "</th>" + td(v) + "</tr>\n"; };
  auto row_html = [&](const std::string& k, const std::string& v) { s += "<tr><th>" + e(k) + "</th><td>" + v + "</td></tr>\n"; };
  if (parent)
    row_html("parent", "<a href=\"#" + e(candidate_anchor(parent->id)) + "\">" + e(parent->id) + "</a>");
  else
    row("parent", p.parent_id && !p.parent_id->empty() ? *p.parent_id + " (not in program.db)" : "none (starting kernel)");
  row("status", status_text(p, c.diverged));
  row("time (median)", time_with_spread(t, c.spreads, p.id) + (t && !c.spreads.count(p.id) ? ", spread not recorded" : ""));
  if (parent && t && time_of(*parent)) row("speed-up vs parent", format_speedup(time_of(*parent), t));
  row("direction (bottleneck targeted)", p.bottleneck.value_or("n/a"));
  row("model", p.model.value_or("n/a"));
  row("gpu", p.gpu_id ? std::to_string(*p.gpu_id) : "n/a");
  if (p.analysis_mode) row("analysis", *p.analysis_mode);
  const auto rl = roofline_of(d, p.id);
  row("% of peak (SOL)", pct_text(sol_of(d, p)));
  if (auto v = pct_of(p.compute_sol_pct) ? pct_of(p.compute_sol_pct) : finite_number(rl, "compute_sol_pct")) row("compute SOL", pct_text(v));
  if (auto v = pct_of(p.memory_sol_pct) ? pct_of(p.memory_sol_pct) : finite_number(rl, "memory_sol_pct")) row("memory SOL", pct_text(v));
  if (auto b = text_of(rl, "bottleneck"); !b.empty()) row("profiled bottleneck", b);
  row("% of the hardware floor", pct_text(pct_of(p.floor_pct)));
  if (p.failure_cause) row("failure cause", *p.failure_cause);
  s += "</table>\n";
  for (const auto& a : d.attempts)
    if (a.program_id && *a.program_id == p.id && (!a.root_cause.empty() || !a.recommended_fix.empty()))
      s += "<p class=\"direction\"><b>Diagnosis:</b> " + e(one_line(a.root_cause, 2000)) + "<br><b>Fix tried:</b> " +
           e(one_line(a.recommended_fix, 2000)) + "</p>\n";
  for (const auto& r : d.reflexions)
    if (r.program_id && *r.program_id == p.id) {
      s += "<p class=\"direction\"><b>Reflexion:</b> " + e(one_line(r.reasoning.empty() ? r.actual_outcome : r.reasoning, 2000));
      if (!r.lessons.empty()) s += "<br><b>Lessons:</b> " + e(one_line(fmt::format("{}", fmt::join(r.lessons, "; ")), 2000));
      s += "</p>\n";
    }
  if (p.error && !p.error->empty()) {
    const auto& err = *p.error;
    const std::size_t keep = 4000;
    s += "<p><b>Error</b>" + std::string(err.size() > keep ? " (its last 4000 characters)" : "") + "</p><pre class=\"error\">" +
         e(err.size() > keep ? err.substr(err.size() - keep) : err) + "</pre>\n";
  }
  if (parent && !p.code.empty()) {
    if (parent->code == p.code)
      s += "<p class=\"note\">Same code as its parent " + e(parent->id) + ".</p>\n";
    else
      s += "<p><b>Diff against its parent</b></p>\n" + diff_html(parent->code, p.code, parent->id, p.id, 600);
  } else if (!p.code.empty()) {
    s += "<details><summary>Code</summary><pre class=\"code\">" + e(p.code) + "</pre></details>\n";
  }
  if (auto it = d.candidate_files.find(p.id); it != d.candidate_files.end() && !it->second.empty())
    s += files_html(p.id, it->second);
  else if (p.round > 0)
    s += "<p class=\"note\">No prompt, reply or log files in candidates/" + e(p.id) + "/.</p>\n";
  return s + "</div></details>\n";
}

std::string details_section(const tree_context& c) {
  std::string s = "<h2 id=\"details\">Candidates</h2>\n";
  if (c.d.programs.empty()) return s + "<p class=\"note\">No programs recorded.</p>\n";
  s += "<p class=\"note\">One entry per program, in the order they were created; open one for its diff against its "
       "parent, direction, model, prompts and replies, failure and log tail, time and roofline.</p>\n";
  for (const auto& p : c.d.programs) s += candidate_details(c, p);
  return s;
}

// ---- roofline --------------------------------------------------------------------------------

std::string roofline_section(const report_data& d, const std::set<std::string>& diverged) {
  std::string s = "<h2 id=\"roofline\">Roofline</h2>\n";
  std::vector<const store::program_record*> verified;
  for (const auto& p : d.programs)
    if (p.status == store::program_status::verified && time_of(p)) verified.push_back(&p);
  std::stable_sort(verified.begin(), verified.end(), [](auto* a, auto* b) { return *a->time_ms < *b->time_ms; });
  std::vector<roofline_row> rows;
  constexpr std::size_t max_rows = 40;
  std::size_t with_data = 0;
  for (const auto* p : verified) {
    roofline_row r;
    r.id = p->id;
    r.anchor = candidate_anchor(p->id);
    r.sol_pct = sol_of(d, *p);
    r.floor_pct = pct_of(p->floor_pct);
    if (!r.sol_pct && !r.floor_pct) continue;
    ++with_data;
    if (rows.size() >= max_rows) continue;
    r.tooltip = p->id + ": " + format_ms(time_of(*p)) + (diverged.count(p->id) ? " (diverged)" : "");
    rows.push_back(std::move(r));
  }
  if (rows.empty())
    return s + "<p class=\"note\">No profile data: no verified kernel has a SOL profile or a hardware floor.</p>\n";
  s += "<p class=\"note\">How close each verified kernel came to the hardware: its share of the peak as profiled "
       "(SOL, the larger of compute and memory) and the physics floor (bytes moved over peak bandwidth) as a share of its "
       "measured time. 100% is the limit.";
  if (with_data > rows.size()) s += fmt::format(" The {} fastest of {} are shown.", rows.size(), with_data);
  s += "</p>\n";
  return s + render_roofline_svg(rows);
}

wallclock_chart make_wallclock(const timeline& tl) {
  wallclock_chart c;
  const auto steps = make_chart(tl, true);
  c.best = steps.best;
  c.markers = steps.markers;
  c.reference_y = tl.initial_ms;
  double end = tl.end_t_s;
  for (const auto& p : tl.points) end = std::max(end, p.t_s);
  c.x_to = end;
  std::optional<double> rounds_start;
  if (!tl.round_starts.empty()) rounds_start = tl.round_starts.front().second;
  else if (tl.first_candidate_t_s) rounds_start = tl.first_candidate_t_s;
  if (rounds_start) {
    c.phases.push_back({0, *rounds_start, "initial", true});
    for (std::size_t i = 0; i < tl.round_starts.size(); ++i)
      c.phases.push_back({tl.round_starts[i].second, i + 1 < tl.round_starts.size() ? tl.round_starts[i + 1].second : end,
                          tl.round_starts[i].first, false});
    c.x_from = legible_x_from(*rounds_start, end);
  }
  return c;
}

} // namespace

std::string candidate_anchor(std::string_view id) {
  std::string out = "cand-";
  for (unsigned char ch : id) {
    if (std::isalnum(ch) || ch == '_' || ch == '.') out += static_cast<char>(ch);
    else out += fmt::format("-{:02x}", ch);
  }
  return out;
}

namespace {

/// Bytes of `raw` as page text: control characters other than newline and tab become '?', and a
/// UTF-8 character cut at either end of a partial read is dropped.
std::string clean_text(std::string raw, bool cut_front, bool cut_back) {
  auto continuation = [](unsigned char c) { return (c & 0xC0) == 0x80; };
  if (cut_front) {
    std::size_t skip = 0;
    while (skip < raw.size() && skip < 4 && continuation(static_cast<unsigned char>(raw[skip]))) ++skip;
    raw.erase(0, skip);
  }
  if (cut_back && !raw.empty()) {
    // Find the last lead byte; drop it and its continuation bytes when the character is incomplete.
    std::size_t i = raw.size();
    std::size_t back = 0;
    while (i > 0 && back < 4 && continuation(static_cast<unsigned char>(raw[i - 1]))) --i, ++back;
    if (i > 0) {
      const auto lead = static_cast<unsigned char>(raw[i - 1]);
      const std::size_t need = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
      if (need > back) raw.erase(i - 1);
    }
  }
  for (auto& ch : raw) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && ch != '\n' && ch != '\t') || c == 0x7F) ch = '?';
  }
  return raw;
}

/// Sort key of a candidate file: its leading call number (0 when none), then its name.
std::pair<long, std::string> file_order(const std::string& name) {
  long n = 0;
  std::size_t i = 0;
  while (i < name.size() && i < 9 && std::isdigit(static_cast<unsigned char>(name[i]))) n = n * 10 + (name[i++] - '0');
  return {i > 0 && i < name.size() && name[i] == '_' ? n : 1'000'000'000L, name};
}

} // namespace

std::vector<candidate_file> read_candidate_files(const fs::path& dir, std::size_t& budget) {
  std::vector<candidate_file> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  std::vector<std::pair<std::pair<long, std::string>, fs::path>> paths;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::error_code fec;
    if (!entry.is_regular_file(fec)) continue;
    const auto name = entry.path().filename().string();
    const auto ext = entry.path().extension().string();
    if (ext != ".txt" && ext != ".log" && ext != ".json") continue;
    paths.emplace_back(file_order(name), entry.path());
  }
  std::sort(paths.begin(), paths.end());
  for (const auto& [key, path] : paths) {
    candidate_file f;
    f.name = key.second;
    std::error_code sec;
    f.size = fs::file_size(path, sec);
    if (sec) continue;
    // Logs and error reports matter at their end; prompts and replies at their start.
    f.from_tail = path.extension() == ".log" || f.name.find("error") != std::string::npos;
    const std::size_t want = static_cast<std::size_t>(std::min<std::uintmax_t>(f.size, candidate_file_limit));
    if (want > budget) {
      f.left_out = true;
      out.push_back(std::move(f));
      continue;
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) continue;
    f.truncated = f.size > want;
    if (f.truncated && f.from_tail) in.seekg(static_cast<std::streamoff>(f.size - want));
    std::string raw(want, '\0');
    in.read(raw.data(), static_cast<std::streamsize>(want));
    raw.resize(static_cast<std::size_t>(std::max<std::streamsize>(0, in.gcount())));
    budget -= std::min(budget, raw.size());
    f.text = clean_text(std::move(raw), f.truncated && f.from_tail, f.truncated && !f.from_tail);
    out.push_back(std::move(f));
  }
  return out;
}

std::string run_state_of(const report_data& d) {
  if (auto rs = text_of(d.summary, "run_state"); !rs.empty()) return rs;
  if (d.summary.value("interrupted", false)) return "interrupted";
  if (!d.summary.empty()) return d.summary.value("success", false) ? "finished" : "failed";
  if (auto it = d.state.find(store::state_key::status); it != d.state.end())
    for (const char* known : {"running", "finished", "failed", "interrupted"})
      if (it->second == known) return known;
  return "failed";
}

std::set<std::string> diverged_ids(const report_data& d) {
  std::set<std::string> out;
  if (auto it = d.state.find(store::state_key::diverged); it != d.state.end()) {
    auto j = nlohmann::json::parse(it->second, nullptr, false);
    if (j.is_array())
      for (const auto& id : j)
        if (id.is_string()) out.insert(id.get<std::string>());
  }
  for (const auto& ev : d.events) {
    const auto type = text_of(ev, "type");
    if ((type == "candidate_result" && ev.contains("diverged") && ev["diverged"].is_boolean() && ev["diverged"].get<bool>()) ||
        (type == "note" && text_of(ev, "what") == "diverged"))
      if (auto id = text_of(ev, "candidate_id"); !id.empty()) out.insert(id);
  }
  return out;
}

report_data load_report_data(const fs::path& run_dir) {
  report_data d;
  d.run_id = run_dir.filename().string();
  if (d.run_id.empty()) d.run_id = run_dir.parent_path().filename().string();
  const auto summary_path = run_dir / "summary.json";
  if (fs::exists(summary_path)) {
    try {
      auto j = nlohmann::json::parse(read_file(summary_path), nullptr, false);
      if (j.is_object()) d.summary = std::move(j);
      else d.problems.push_back("summary.json is not a JSON object");
    } catch (const std::exception& ex) {
      d.problems.push_back(ex.what());
    }
  } else {
    d.problems.push_back("no summary.json (the run did not finish)");
  }
  const auto events_path = run_dir / "events.jsonl";
  if (fs::exists(events_path)) {
    try {
      std::size_t skipped = 0;
      d.events = store::read_events(events_path, &skipped);
      if (skipped > 0) d.problems.push_back(fmt::format("events.jsonl: {} unreadable line(s) skipped", skipped));
    } catch (const std::exception& ex) {
      d.problems.push_back(ex.what());
    }
  } else {
    d.problems.push_back("no events.jsonl");
  }
  const auto db_path = run_dir / "program.db";
  if (fs::exists(db_path)) {
    try {
      auto db = store::program_db::open(db_path, store::program_db::mode::read_only);
      d.programs = db.list_programs();
      d.llm_usage = db.llm_usage();
      d.failures_by_cause = db.failures_by_cause();
      d.have_db = true;
      d.state = db.all_state();
      d.attempts = db.list_attempts();
      d.reflexions = db.list_reflexions();
    } catch (const std::exception& ex) {
      d.problems.push_back(ex.what());
    }
  } else {
    d.problems.push_back("no program.db");
  }
  std::size_t budget = candidate_files_budget;
  std::error_code ec;
  if (fs::is_directory(run_dir / "candidates", ec)) {
    std::vector<fs::path> dirs;
    for (const auto& entry : fs::directory_iterator(run_dir / "candidates", ec))
      if (std::error_code dec; entry.is_directory(dec)) dirs.push_back(entry.path());
    // Program order first, so that the budget goes to the run's candidates in the order they ran.
    std::map<std::string, std::size_t> order;
    for (std::size_t i = 0; i < d.programs.size(); ++i) order.emplace(d.programs[i].id, i);
    std::stable_sort(dirs.begin(), dirs.end(), [&](const fs::path& a, const fs::path& b) {
      auto ia = order.find(a.filename().string()), ib = order.find(b.filename().string());
      const auto ka = ia == order.end() ? order.size() : ia->second, kb = ib == order.end() ? order.size() : ib->second;
      return ka != kb ? ka < kb : a.filename() < b.filename();
    });
    for (const auto& dir : dirs)
      if (auto files = read_candidate_files(dir, budget); !files.empty())
        d.candidate_files[dir.filename().string()] = std::move(files);
  }
  return d;
}

std::vector<store::program_record> lineage(const std::vector<store::program_record>& programs, const std::string& best_id) {
  std::vector<store::program_record> chain;
  std::set<std::string> seen;
  const auto* p = find_program(programs, best_id);
  while (p && seen.insert(p->id).second) {
    chain.push_back(*p);
    p = p->parent_id && !p->parent_id->empty() ? find_program(programs, *p->parent_id) : nullptr;
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

std::string best_program_id(const report_data& d) {
  if (positive_ms(d.summary, "best_ms"))
    if (auto id = text_of(d.summary, "best_program_id"); !id.empty()) return id;
  const store::program_record* best = nullptr;
  for (const auto& p : d.programs)
    if (p.status == store::program_status::verified && time_of(p) && (!best || *p.time_ms < *best->time_ms)) best = &p;
  return best ? best->id : "";
}

std::string render_report_html(const report_data& d) {
  const auto v = make_summary_view(d.summary);
  const auto best_id = best_program_id(d);
  const auto initial_ms = initial_ms_of(d);
  const auto tl = build_timeline(d);
  const auto state = run_state_of(d);
  const auto diverged = diverged_ids(d);
  const auto tree = build_program_tree(d.programs);
  tree_context tc{d, tree, {}, diverged, spreads_of(d), best_id};
  for (const auto& p : lineage(d.programs, best_id)) tc.best_path.insert(p.id);

  std::string s = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  // A run in progress reloads itself (no script needed); a finished page stays as it is.
  if (state == "running") s += "<meta http-equiv=\"refresh\" content=\"30\">\n";
  s += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  s += "<title>kagent-actors report: " + e(d.run_id) + (state == "running" ? " (running)" : "") + "</title>\n<style>" +
       std::string(css) + "</style>\n</head>\n<body>\n";
  s += "<h1>kagent-actors: " + e(v.title) + "</h1>\n<p class=\"meta\">run " + e(d.run_id) + " &middot; state <b class=\"run-state\">" +
       e(state) + "</b>";
  for (const char* k : {"vendor", "gpu_name"})
    if (auto t = text_of(d.summary, k); !t.empty()) s += " &middot; " + e(t);
  if (d.summary.contains("devices") && d.summary["devices"].is_array())
    s += " &middot; devices " + e(d.summary["devices"].dump());
  s += "</p>\n";
  s += "<nav class=\"toc\"><a href=\"#summary\">summary</a> <a href=\"#progress\">progress</a> <a href=\"#tree\">search "
       "tree</a> <a href=\"#lineage\">lineage</a> <a href=\"#diff\">diff</a> <a href=\"#top\">fastest</a> <a "
       "href=\"#roofline\">roofline</a> <a href=\"#failures\">failures</a> <a href=\"#llm\">LLM</a> <a "
       "href=\"#details\">candidates</a> <a href=\"#events\">events</a></nav>\n";
  const bool success = v.success;
  if (state == "running") {
    std::optional<double> best_ms;
    if (auto* b = best_id.empty() ? nullptr : find_program(d.programs, best_id)) best_ms = time_of(*b);
    int ok = 0, failed = 0, pending = 0;
    for (const auto& p : d.programs) {
      if (p.round == 0) continue;
      ok += p.status == store::program_status::verified, failed += p.status == store::program_status::failed,
          pending += p.status == store::program_status::pending;
    }
    s += fmt::format("<p class=\"status-running\">Running: {} candidate(s) verified, {} failed, {} pending so far; {}. "
                     "This page reloads every 30 s and shows what the run directory held when it was built (run "
                     "<code>kagent-actors report</code> on the run to rebuild it). A run killed without cleanup also "
                     "reads as running.</p>\n",
                     ok, failed, pending,
                     best_ms ? "best so far " + e(best_id) + " at " + e(format_ms(best_ms)) + " (" +
                                   e(format_speedup(initial_ms, best_ms)) + " vs the starting kernel)"
                             : std::string("no verified kernel yet"));
  } else if (state == "interrupted") {
    const auto best_ms = positive_ms(d.summary, "best_ms");
    s += "<p class=\"status-interrupted\">Interrupted by " + e(text_of(d.summary, "interrupted_by")) + ": " +
         (best_ms ? "best kernel so far " + e(best_id) + " at " + e(format_ms(best_ms)) + " (" +
                        e(format_speedup(initial_ms, best_ms)) + " vs the starting kernel)"
                  : std::string("no candidate was verified yet")) +
         ". Resume with <code>" + e(text_of(d.summary, "resume_command")) + "</code>.</p>\n";
  } else {
    s += success ? "<p class=\"status-ok\">Finished: best kernel " + e(best_id) + " at " +
                     e(format_ms(positive_ms(d.summary, "best_ms"))) + " (" +
                     e(format_speedup(initial_ms, positive_ms(d.summary, "best_ms"))) + " vs the starting kernel).</p>\n"
               : "<p class=\"status-failed\">Run failed: " + e(v.error) + "</p>\n";
  }
  if (!d.problems.empty()) {
    s += "<ul class=\"problems\">";
    for (const auto& p : d.problems) s += "<li>" + e(p) + "</li>";
    s += "</ul>\n";
  }
  s += summary_section(v, d);
  s += "<h2 id=\"progress\">Progress</h2>\n";
  if (!tl.source.empty())
    s += fmt::format("<p class=\"note\">{} candidate result(s) from {}. Line: best time so far; dots: verified "
                     "candidates; red crosses: failed candidates; dashed: starting kernel. On the wall-clock chart the "
                     "shaded bands are the initial phase and the rounds.</p>\n",
                     tl.points.size(), e(tl.source));
  s += render_wallclock_svg(make_wallclock(tl));
  s += render_svg(make_chart(tl, false));
  s += tree_section(tc);
  s += lineage_section(d, best_id, initial_ms);
  s += diff_section(d, best_id);
  s += top_section(d, initial_ms, diverged);
  s += roofline_section(d, diverged);
  s += failures_section(d, v);
  s += llm_section(d);
  s += details_section(tc);
  s += events_section(d);
  s += "<p class=\"note\">Generated by kagent-actors from summary.json, events.jsonl, program.db and candidates/.</p>\n";
  s += "</body>\n</html>\n";
  return s;
}

fs::path write_report_html(const fs::path& run_dir) {
  const auto html = render_report_html(load_report_data(run_dir));
  const auto path = run_dir / "report.html";
  store::write_file_atomic(path, html);
  return path;
}

fs::path write_report_html(const fs::path& run_dir, const nlohmann::json& summary) {
  auto d = load_report_data(run_dir);
  if (summary.is_object()) {
    d.summary = summary;
    d.problems.erase(std::remove_if(d.problems.begin(), d.problems.end(),
                                    [](const std::string& p) { return p.find("summary.json") != std::string::npos; }),
                     d.problems.end());
  }
  const auto path = run_dir / "report.html";
  store::write_file_atomic(path, render_report_html(d));
  return path;
}

} // namespace kagent::report
