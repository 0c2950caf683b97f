// reporter: the run's voice. Appends every event to events.jsonl, keeps a progress line on a TTY
// (plain log lines otherwise), and prints the final summary table.
#include <fmt/format.h>
#include <unistd.h>

#include <iostream>

#include "actors/actors.hpp"
#include "platform/store/event_log.hpp"

namespace kagent {

namespace {

struct reporter_state {
  std::unique_ptr<store::event_log> log;
  bool tty = false;
  int done = 0, failed = 0;
  double best_ms = -1, initial_ms = -1;
  double cost = 0;
  long tokens = 0;
  std::string round, mode;
};

std::string fmt_ms(double v) { return v >= 0 ? fmt::format("{:.4f} ms", v) : "n/a"; }

void print_summary(const nlohmann::json& s) {
  auto num = [&](const char* k) { return s.contains(k) && s[k].is_number() ? s[k].get<double>() : -1.0; };
  const double eager = num("eager_ms"), comp = num("compile_ms"), init = num("initial_ms"), best = num("best_ms");
  auto speed = [&](double ref) { return ref > 0 && best > 0 ? fmt::format("{:.2f}x", ref / best) : "n/a"; };
  std::cout << "\n== kagent-actors summary: " << s.value("strategy", "") << " on " << s.value("kernel_dir", "") << "\n";
  std::cout << fmt::format("  {:<22} {:>14}  {:>10}\n", "", "time", "best speed-up");
  std::cout << fmt::format("  {:<22} {:>14}  {:>10}\n", "PyTorch eager", fmt_ms(eager), speed(eager));
  std::cout << fmt::format("  {:<22} {:>14}  {:>10}\n", "torch.compile", fmt_ms(comp), speed(comp));
  std::cout << fmt::format("  {:<22} {:>14}  {:>10}\n", "starting kernel", fmt_ms(init), speed(init));
  std::cout << fmt::format("  {:<22} {:>14}  {:>10}\n", "best kernel", fmt_ms(best), best > 0 ? "1.00x" : "n/a");
  std::cout << fmt::format("  rounds {}  candidates {}  verified {}  failed {}\n", s.value("rounds", 0),
                           s.value("candidates", 0), s.value("verified", 0), s.value("failed", 0));
  if (s.contains("failures_by_cause") && !s["failures_by_cause"].empty()) {
    std::string causes;
    for (auto it = s["failures_by_cause"].begin(); it != s["failures_by_cause"].end(); ++it)
      causes += fmt::format("{}{}={}", causes.empty() ? "" : ", ", it.key(), it.value().get<long>());
    std::cout << "  failures by cause: " << causes << "\n";
  }
  if (s.contains("llm")) {
    const auto& l = s["llm"];
    std::cout << fmt::format("  LLM: {} calls, {} tokens in, {} tokens out, est. ${:.4f}\n", l.value("calls", 0L),
                             l.value("tokens_in", 0L), l.value("tokens_out", 0L), l.value("cost_usd", 0.0));
  }
  std::cout << "  best kernel: " << s.value("best_kernel_path", "(none)") << "\n";
  std::cout << "  run directory: " << s.value("run_dir", "") << "\n";
  if (!s.value("success", false)) std::cout << "  FAILED: " << s.value("error", "") << "\n";
  std::cout.flush();
}

} // namespace

caf::behavior reporter_actor(caf::event_based_actor* self, context_ptr ctx) {
  install_exception_handler(self, "reporter");
  auto st = std::make_shared<reporter_state>();
  st->log = std::make_unique<store::event_log>(ctx->run_path + "/events.jsonl");
  st->tty = ::isatty(STDERR_FILENO) == 1;

  auto progress = [=](const std::string& type, const nlohmann::json& p) {
    if (type == "candidate_result") {
      if (p.value("ok", false)) ++st->done;
      else ++st->failed;
    }
    if (type == "run_start" && p.contains("initial_ms") && p["initial_ms"].is_number()) st->initial_ms = p["initial_ms"];
    if (p.contains("best_ms") && p["best_ms"].is_number()) st->best_ms = p["best_ms"];
    if (type == "round_start") st->round = fmt::format("round {}/{}", p.value("round", 0), p.value("max_rounds", 0));
    if (type == "mode_change") st->mode = p.value("mode", "");
    if (type == "llm_call" && p.contains("run_totals")) {
      st->cost = p["run_totals"].value("cost_usd", 0.0);
      st->tokens = p["run_totals"].value("tokens_in", 0L) + p["run_totals"].value("tokens_out", 0L);
    }
    std::string line = fmt::format("[{}] {} ok, {} failed, best {}{}, LLM {} tok ${:.3f}{}", st->round, st->done,
                                   st->failed, fmt_ms(st->best_ms),
                                   st->best_ms > 0 && st->initial_ms > 0
                                       ? fmt::format(" ({:.2f}x)", st->initial_ms / st->best_ms)
                                       : "",
                                   st->tokens, st->cost, st->mode.empty() ? "" : " | " + st->mode);
    if (st->tty) {
      std::cerr << "\r\033[K" << line << std::flush;
    } else if (ctx->verbose || type == "round_end" || type == "error" || type == "mode_change" ||
               type == "run_start" || type == "note") {
      std::cerr << type << ": " << p.dump() << "\n";
    }
  };

  return {
      [=](const run_event& e) {
        nlohmann::json payload = nlohmann::json::parse(e.payload_json, nullptr, false);
        if (payload.is_discarded()) payload = nlohmann::json{{"text", e.payload_json}};
        st->log->append(e.type, payload);
        progress(e.type, payload);
      },
      [=](finish_atom, const std::string& summary_json) {
        if (st->tty) std::cerr << "\n";
        print_summary(nlohmann::json::parse(summary_json));
        return caf::unit;
      },
  };
}

} // namespace kagent
