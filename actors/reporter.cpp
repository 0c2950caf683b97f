// reporter: the run's voice. Appends every event to events.jsonl and folds it into the progress
// state (platform/report). On a TTY one progress line is redrawn in place (\r) and significant
// events scroll above it; otherwise each significant event is one plain log line. At the end it
// prints the summary table and writes report.html; a report that cannot be written is logged,
// never fatal.
#include <unistd.h>

#include <chrono>
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
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();

  double now_s() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
};

// Event types that stay in the scrollback on a TTY (a candidate result only when it is a new best).
bool tty_worthy(const std::string& type, const nlohmann::json& p) {
  if (type == "candidate_result")
    return p.is_object() && p.contains("new_best") && p["new_best"].is_boolean() && p["new_best"].get<bool>();
  return type != "candidate_start" && type != "llm_usage" && type != "llm_call" && type != "llm_retry";
}

} // namespace

caf::behavior reporter_actor(caf::event_based_actor* self, context_ptr ctx) {
  install_exception_handler(self, "reporter");
  auto st = std::make_shared<reporter_state>();
  st->log = std::make_unique<store::event_log>(ctx->run_path + "/events.jsonl");
  st->tty = ::isatty(STDERR_FILENO) == 1;

  auto redraw = [=] {
    std::cerr << "\r\033[K" << report::format_progress_line(st->progress, st->now_s()) << std::flush;
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
        if (st->tty) {
          if (verbose || tty_worthy(e.type, payload)) {
            if (auto line = report::format_log_line(st->progress, e.type, payload, t, verbose)) {
              clear_line();
              std::cerr << *line << "\n";
            }
          }
          if (!st->finished) redraw();
        } else if (auto line = report::format_log_line(st->progress, e.type, payload, t, verbose)) {
          std::cerr << *line << "\n" << std::flush;
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
          std::cerr << report::format_progress_line(st->progress, st->now_s()) << "\n" << std::flush;
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
