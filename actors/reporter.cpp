// The reporter's steps (actors/reporter.hpp).
#include "actors/reporter.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "actors/actors.hpp"
#include "platform/report/html_report.hpp"
#include "platform/report/summary_table.hpp"

namespace kagent {

namespace {

// Local to the reporter (never crosses a process boundary): redraw the progress line so that its
// clock and GPU busy figure move while no event arrives.
using redraw_atom = caf::atom_constant<caf::atom("rp_redraw")>;
constexpr auto redraw_interval = std::chrono::seconds(1);

// Event types that stay in the scrollback on a TTY (a candidate result only when it is a new best).
bool tty_worthy(const std::string& type, const nlohmann::json& p) {
  if (type == "candidate_result")
    return p.is_object() && p.contains("new_best") && p["new_best"].is_boolean() && p["new_best"].get<bool>();
  return type != "candidate_start" && type != "candidate_end" && type != "llm_call" && type != "llm_retry";
}

/// With --quiet only these reach the terminal (the summary table always does).
bool quiet_worthy(const std::string& type) { return type == "error" || type == "run_end" || type == "interrupted"; }

bool wants_color() {
  if (::isatty(STDERR_FILENO) != 1) return false;
  if (const char* n = std::getenv("NO_COLOR"); n && *n) return false;  // https://no-color.org
  const char* term = std::getenv("TERM");
  return !(term && std::strcmp(term, "dumb") == 0);
}

/// A log line coloured by what it says: a new best green, a failure red, a duplicate grey, an
/// interruption yellow.
std::string colored(const std::string& type, const nlohmann::json& p, const std::string& line) {
  const char* code = nullptr;
  if (type == "candidate_result" && p.is_object()) {
    const bool ok = p.value("ok", false);
    if (ok && p.value("new_best", false)) code = "32";
    else if (!ok) code = p.value("failure_cause", std::string{}) == "duplicate" ? "90" : "31";
  } else if (type == "error") {
    code = "31";
  } else if (type == "interrupted" || (type == "run_end" && p.is_object() && p.value("run_state", "") == "interrupted")) {
    code = "33";
  } else if (type == "run_end") {
    code = p.is_object() && p.value("success", false) ? "32" : "31";
  }
  return code ? std::string("\033[") + code + "m" + line + "\033[0m" : line;
}

/// The progress line's width on the terminal behind stderr, read at every redraw (so a resized
/// window is followed).
std::size_t terminal_columns() {
  struct winsize ws {};
  const int cols = ::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 ? ws.ws_col : 0;
  return report::progress_columns(cols, std::getenv("COLUMNS"));
}

} // namespace

caf::behavior reporter_actor(caf::stateful_actor<reporter_state>* self, context_ptr ctx) {
  return self->state.start(self, std::move(ctx));
}

caf::behavior reporter_state::start(caf::stateful_actor<reporter_state>* self, context_ptr ctx) {
  install_exception_handler(self, "reporter");
  self_ = self;
  ctx_ = std::move(ctx);
  log_ = std::make_unique<store::event_log>(ctx_->run_path + "/events.jsonl");
  tty_ = ::isatty(STDERR_FILENO) == 1 && !ctx_->quiet;
  color_ = wants_color();
  if (tty_) self->delayed_send(self, redraw_interval, redraw_atom::value);
  return {
      [this](const run_event& e) { on_event(e); },
      [this](redraw_atom) { on_redraw(); },
      [this](const run_finished& end) {
        on_finish(end.summary);
        return caf::unit;
      },
  };
}

void reporter_state::on_event(const run_event& e) {
  const std::string type = to_string(e.kind);
  const auto& payload = e.payload;
  log_->append(type, payload);
  const double t = now_s();
  report::update(progress_, type, payload, t);
  show(type, payload, t);
  refresh_report(type, t);
}

// What the terminal shows of an event: with --quiet only errors and the end; on a TTY the significant
// ones above the redrawn progress line; otherwise one plain line each.
void reporter_state::show(const std::string& type, const nlohmann::json& payload, double t) {
  const bool verbose = ctx_->verbose;
  if (ctx_->quiet) {
    if (quiet_worthy(type))
      if (auto line = report::format_log_line(progress_, type, payload, t, false))
        std::cerr << (color_ ? colored(type, payload, *line) : *line) << "\n" << std::flush;
  } else if (tty_) {
    if (verbose || tty_worthy(type, payload)) {
      if (auto line = report::format_log_line(progress_, type, payload, t, verbose)) {
        clear_line();
        std::cerr << (color_ ? colored(type, payload, *line) : *line) << "\n";
      }
    }
    if (!finished_) redraw();
  } else if (auto line = report::format_log_line(progress_, type, payload, t, verbose)) {
    std::cerr << *line << "\n" << std::flush;
  }
}

// The page of a running run (it refreshes itself): rewritten at milestones, at most once a minute for
// ordinary results.
void reporter_state::refresh_report(const std::string& type, double t) {
  const bool milestone = type == "initial" || type == "round_end";
  if (finished_ || !(milestone || (type == "candidate_result" && t - last_report_s_ >= 60))) return;
  last_report_s_ = t;
  try {
    report::write_report_html(ctx_->run_path);
  } catch (const std::exception& ex) {
    if (!ctx_->quiet) std::cerr << "reporter: report.html not updated: " << ex.what() << "\n";
  }
}

void reporter_state::on_redraw() {
  if (finished_) return;
  redraw();
  self_->delayed_send(self_, redraw_interval, redraw_atom::value);
}

void reporter_state::on_finish(nlohmann::json summary) {
  finished_ = true;
  if (tty_) {
    clear_line();
    std::cerr << report::format_progress_line(progress_, now_s(), terminal_columns()) << "\n" << std::flush;
  }
  if (!summary.is_object()) summary = nlohmann::json::object();
  // Devices the run switched to synthetic analysis, as the events told them, when the summary does not
  // say.
  if (!summary.contains("synthetic_devices") && !summary.contains("analysis_mode")) {
    nlohmann::json synthetic = nlohmann::json::array();
    for (const auto& [gpu, mode] : progress_.modes)
      if (mode == "synthetic") synthetic.push_back(gpu);
    if (!synthetic.empty()) summary["synthetic_devices"] = synthetic;
  }
  std::cout << report::format_summary_table(summary);
  try {
    const auto path = report::write_report_html(ctx_->run_path, summary);
    std::cout << "  report: " << path.string() << "\n";
  } catch (const std::exception& ex) {
    std::cerr << "reporter: report.html not written: " << ex.what() << "\n";
  }
  std::cout.flush();
}

void reporter_state::redraw() {
  std::cerr << "\r\033[K" << report::format_progress_line(progress_, now_s(), terminal_columns()) << std::flush;
  line_shown_ = true;
}

void reporter_state::clear_line() {
  if (line_shown_) std::cerr << "\r\033[K";
  line_shown_ = false;
}

} // namespace kagent
