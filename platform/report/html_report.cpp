#include "platform/report/html_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "platform/common/errors.hpp"
#include "platform/report/line_diff.hpp"
#include "platform/report/progress.hpp"
#include "platform/report/summary_table.hpp"
#include "platform/report/svg_chart.hpp"
#include "platform/report/text.hpp"
#include "platform/store/event_log.hpp"
#include "platform/store/util.hpp"

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
  for (const auto& ev : d.events) {
    const auto type = text_of(ev, "type");
    const double t = t0 ? std::max(0.0, parse_iso_utc(text_of(ev, "ts")).value_or(*t0) - *t0) : 0;
    if (type == "initial") tl.initial_t_s = t;
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
)";

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
  row("GPU busy", have && wall && *wall > 0 ? fmt::format("{:.0f}% ({:.1f} device-s over {} device(s))",
                                                           device_s / (*wall * devices) * 100, device_s, devices)
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
  const auto diff = line_diff(split_lines(start->code), split_lines(best->code));
  const auto hunks = unified_hunks(diff, 3);
  int added = 0, removed = 0;
  for (const auto& l : diff) added += l.op == diff_op::add, removed += l.op == diff_op::remove;
  s += fmt::format("<p class=\"note\">{} line(s) removed, {} added.</p>\n<pre class=\"diff\">", removed, added);
  s += "<span class=\"file\">--- " + e(start->id) + "</span><span class=\"file\">+++ " + e(best->id) + "</span>";
  std::size_t shown = 0;
  for (const auto& h : hunks) {
    if (shown >= max_diff_lines) break;
    s += "<span class=\"hunk\">" + e(h.header()) + "</span>";
    for (const auto& l : h.lines) {
      if (shown++ >= max_diff_lines) break;
      const char* cls = l.op == diff_op::add ? "add" : l.op == diff_op::remove ? "del" : "ctx";
      const char mark = l.op == diff_op::add ? '+' : l.op == diff_op::remove ? '-' : ' ';
      s += fmt::format("<span class=\"{}\">{}{}</span>", cls, mark, e(l.text));
    }
  }
  s += "</pre>\n";
  if (shown >= max_diff_lines) s += fmt::format("<p class=\"note\">Diff cut after {} lines.</p>\n", max_diff_lines);
  s += "<details><summary>Full best kernel (" + e(best->id) + ")</summary><pre class=\"code\">" + e(best->code) +
       "</pre></details>\n";
  return s;
}

std::string top_section(const report_data& d, std::optional<double> initial_ms) {
  std::vector<const store::program_record*> verified;
  for (const auto& p : d.programs)
    if (p.status == store::program_status::verified && time_of(p)) verified.push_back(&p);
  std::stable_sort(verified.begin(), verified.end(), [](auto* a, auto* b) { return *a->time_ms < *b->time_ms; });
  std::string s = "<h2 id=\"top\">Fastest verified kernels</h2>\n";
  if (verified.empty()) return s + "<p class=\"note\">None.</p>\n";
  s += "<table><tr><th>program</th><th>parent</th><th>round</th><th>gpu</th><th>time</th><th>speed-up vs start</th>"
       "<th>bottleneck</th><th>analysis</th><th title=\"bytes moved over the peak memory bandwidth, as a share of the "
       "measured time (100: at the hardware limit)\">% of hardware floor</th></tr>\n";
  for (std::size_t i = 0; i < verified.size() && i < 10; ++i) {
    const auto& p = *verified[i];
    s += "<tr>" + td(p.id) + td(p.parent_id.value_or("")) + td(std::to_string(p.round), true) +
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
       "</tr>\n";
  return s + "</table>\n";
}

std::string events_section(const report_data& d) {
  static const std::set<std::string> notable{"run_start", "initial", "mode_change", "profiling_failed", "error",
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

} // namespace

report_data load_report_data(const fs::path& run_dir) {
  report_data d;
  d.run_id = run_dir.filename().string();
  if (d.run_id.empty()) d.run_id = run_dir.parent_path().filename().string();
  const auto summary_path = run_dir / "summary.json";
  if (fs::exists(summary_path)) {
    try {
      auto j = nlohmann::json::parse(store::read_text_file(summary_path), nullptr, false);
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
    } catch (const std::exception& ex) {
      d.problems.push_back(ex.what());
    }
  } else {
    d.problems.push_back("no program.db");
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

  std::string s = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  s += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  s += "<title>kagent-actors report: " + e(d.run_id) + "</title>\n<style>" + std::string(css) + "</style>\n</head>\n<body>\n";
  s += "<h1>kagent-actors: " + e(v.title) + "</h1>\n<p class=\"meta\">run " + e(d.run_id);
  for (const char* k : {"vendor", "gpu_name"})
    if (auto t = text_of(d.summary, k); !t.empty()) s += " &middot; " + e(t);
  if (d.summary.contains("devices") && d.summary["devices"].is_array())
    s += " &middot; devices " + e(d.summary["devices"].dump());
  s += "</p>\n";
  const bool success = v.success;
  if (d.summary.value("interrupted", false)) {
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
                     "candidates; red crosses: failed candidates; dashed: starting kernel.</p>\n",
                     tl.points.size(), e(tl.source));
  s += render_svg(make_chart(tl, true));
  s += render_svg(make_chart(tl, false));
  s += lineage_section(d, best_id, initial_ms);
  s += diff_section(d, best_id);
  s += top_section(d, initial_ms);
  s += failures_section(d, v);
  s += llm_section(d);
  s += events_section(d);
  s += "<p class=\"note\">Generated by kagent-actors from summary.json, events.jsonl and program.db.</p>\n";
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
