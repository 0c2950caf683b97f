// reporter: the run's voice. Appends every event to events.jsonl and folds it into the progress
// state (platform/report). On a TTY one progress line is redrawn in place (\r) and significant
// events scroll above it; otherwise each significant event is one plain log line. At the end it
// prints the summary table and writes report.html; a report that cannot be written is logged,
// never fatal. report.html is also rewritten while the run goes on (after the starting kernel, at
// every round's end, at most once a minute on results), so that its auto-refresh shows progress.
// --quiet keeps only errors, the end line and the summary; colours only on a TTY without NO_COLOR.
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "actors/actors.hpp"
#include "platform/report/html_report.hpp"
#include "platform/report/progress.hpp"
#include "platform/report/summary_table.hpp"
#include "platform/store/event_log.hpp"

namespace kagent {

namespace {

// Local to the reporter (never crosses a process boundary): redraw the progress line so that its
// clock and GPU busy figure move while no event arrives.
using redraw_atom = caf::atom_constant<caf::atom("rp_redraw")>;
constexpr auto redraw_interval = std::chrono::seconds(1);

struct reporter_state {
  std::unique_ptr<store::event_log> log;
  report::progress_state progress;
  bool tty = false;
  bool line_shown = false;  ///< a progress line is on the terminal's last row
  bool finished = false;
  bool color = false;       ///< ANSI colours (a TTY, NO_COLOR unset, TERM not "dumb")
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  double last_report_s = -1;  ///< when report.html was last rewritten mid-run

  double now_s() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
};

// Event types that stay in the scrollback on a TTY (a candidate result only when it is a new best).
bool tty_worthy(const std::string& type, const nlohmann::json& p) {
  if (type == "candidate_result")
    return p.is_object() && p.contains("new_best") && p["new_best"].is_boolean() && p["new_best"].get<bool>();
  return type != "candidate_start" && type != "llm_usage" && type != "llm_call" && type != "llm_retry";
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

caf::behavior reporter_actor(caf::event_based_actor* self, context_ptr ctx) {
  install_exception_handler(self, "reporter");
  auto st = std::make_shared<reporter_state>();
  st->log = std::make_unique<store::event_log>(ctx->run_path + "/events.jsonl");
  st->tty = ::isatty(STDERR_FILENO) == 1 && !ctx->quiet;
  st->color = wants_color();

  auto redraw = [=] {
    std::cerr << "\r\033[K" << report::format_progress_line(st->progress, st->now_s(), terminal_columns())
              << std::flush;
    st->line_shown = true;
  };
  auto clear_line = [=] {
    if (st->line_shown) std::cerr << "\r\033[K";
    st->line_shown = false;
  };

  if (st->tty) self->delayed_send(self, redraw_interval, redraw_atom::value);

  return {
      [=](const run_event& e) {
        nlohmann::json payload = nlohmann::json::parse(e.payload_json, nullptr, false);
        if (payload.is_discarded()) payload = nlohmann::json{{"text", e.payload_json}};
        st->log->append(e.type, payload);
        const double t = st->now_s();
        report::update(st->progress, e.type, payload, t);
        const bool verbose = ctx->verbose;
        if (ctx->quiet) {
          if (quiet_worthy(e.type))
            if (auto line = report::format_log_line(st->progress, e.type, payload, t, false))
              std::cerr << (st->color ? colored(e.type, payload, *line) : *line) << "\n" << std::flush;
        } else if (st->tty) {
          if (verbose || tty_worthy(e.type, payload)) {
            if (auto line = report::format_log_line(st->progress, e.type, payload, t, verbose)) {
              clear_line();
              std::cerr << (st->color ? colored(e.type, payload, *line) : *line) << "\n";
            }
          }
          if (!st->finished) redraw();
        } else if (auto line = report::format_log_line(st->progress, e.type, payload, t, verbose)) {
          std::cerr << *line << "\n" << std::flush;
        }
        // The page of a running run (it refreshes itself): rewritten at milestones, at most once a
        // minute for ordinary results.
        const bool milestone = e.type == "initial" || e.type == "round_end";
        if (!st->finished && (milestone || (e.type == "candidate_result" && t - st->last_report_s >= 60))) {
          st->last_report_s = t;
          try {
            report::write_report_html(ctx->run_path);
          } catch (const std::exception& ex) {
            if (!ctx->quiet) std::cerr << "reporter: report.html not updated: " << ex.what() << "\n";
          }
        }
      },
      [=](redraw_atom) {
        if (st->finished) return;
        redraw();
        self->delayed_send(self, redraw_interval, redraw_atom::value);
      },
      [=](finish_atom, const std::string& summary_json) {
        st->finished = true;
        if (st->tty) {
          clear_line();
          std::cerr << report::format_progress_line(st->progress, st->now_s(), terminal_columns()) << "\n"
                    << std::flush;
        }
        nlohmann::json summary = nlohmann::json::parse(summary_json, nullptr, false);
        if (!summary.is_object()) summary = nlohmann::json::object();
        // Devices the run switched to synthetic analysis, as the events told them, when the
        // summary does not say.
        if (!summary.contains("synthetic_devices") && !summary.contains("analysis_mode")) {
          nlohmann::json synthetic = nlohmann::json::array();
          for (const auto& [gpu, mode] : st->progress.modes)
            if (mode == "synthetic") synthetic.push_back(gpu);
          if (!synthetic.empty()) summary["synthetic_devices"] = synthetic;
        }
        std::cout << report::format_summary_table(summary);
        try {
          const auto path = report::write_report_html(ctx->run_path, summary);
          std::cout << "  report: " << path.string() << "\n";
        } catch (const std::exception& ex) {
          std::cerr << "reporter: report.html not written: " << ex.what() << "\n";
        }
        std::cout.flush();
        return caf::unit;
      },
  };
}

} // namespace kagent
