#pragma once
// reporter: the run's voice, a stateful actor. Appends every event to events.jsonl and folds it into
// the progress state (platform/report). On a TTY one progress line is redrawn in place (\r) and
// significant events scroll above it; otherwise each significant event is one plain log line. At the
// end it prints the summary table and writes report.html; a report that cannot be written is logged,
// never fatal. report.html is also rewritten while the run goes on (after the starting kernel, at
// every round's end, at most once a minute on results), so that its auto-refresh shows progress.
// --quiet keeps only errors, the end line and the summary; colours only on a TTY without NO_COLOR.
#include <caf/all.hpp>

#include <chrono>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "actors/context.hpp"
#include "messages/messages.hpp"
#include "platform/report/progress.hpp"
#include "platform/store/event_log.hpp"

namespace kagent {

class reporter_state {
public:
  static inline const char* name = "reporter";

  caf::behavior start(caf::stateful_actor<reporter_state>* self, context_ptr ctx);

private:
  void on_event(const run_event& e);
  void show(const std::string& type, const nlohmann::json& payload, double t);
  void refresh_report(const std::string& type, double t);
  void on_redraw();
  void on_finish(nlohmann::json summary);
  void redraw();
  void clear_line();
  double now_s() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }

  caf::stateful_actor<reporter_state>* self_ = nullptr;
  context_ptr ctx_;
  std::unique_ptr<store::event_log> log_;
  report::progress_state progress_;
  bool tty_ = false;
  bool line_shown_ = false;  ///< a progress line is on the terminal's last row
  bool finished_ = false;
  bool color_ = false;       ///< ANSI colours (a TTY, NO_COLOR unset, TERM not "dumb")
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  double last_report_s_ = -1;  ///< when report.html was last rewritten mid-run
};

/// events.jsonl, the progress line, the final summary table and report.html.
caf::behavior reporter_actor(caf::stateful_actor<reporter_state>* self, context_ptr ctx);

} // namespace kagent
