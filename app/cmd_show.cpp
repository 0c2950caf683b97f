// `kagent-actors show RUN [--json]`: one run's summary for humans (or summary.json enriched with the
// database's status). A run without summary.json (killed, or still running) shows what program.db
// knows. RUN is a run directory, or a run id (or a unique prefix of one) under --run-dir.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/command.hpp"
#include "app/run_info.hpp"
#include "platform/common/errors.hpp"

namespace fs = std::filesystem;

namespace kagent::app {
namespace {

struct show_options {
  std::string run;
  std::string run_dir = ".optimize";
  bool json = false;
};

struct llm_totals {
  std::int64_t calls = 0, failed = 0, tokens_in = 0, tokens_out = 0;
  double cost = 0;
  bool known = false;
};

llm_totals llm_of(const run_info& r) {
  llm_totals t;
  if (r.summary && r.summary->contains("llm") && (*r.summary)["llm"].is_object()) {
    const auto& l = (*r.summary)["llm"];
    auto i = [&](const char* k) { return l.contains(k) && l[k].is_number() ? l[k].get<std::int64_t>() : 0; };
    t.calls = i("calls");
    t.failed = i("failed_calls");
    t.tokens_in = i("tokens_in");
    t.tokens_out = i("tokens_out");
    t.cost = l.contains("cost_usd") && l["cost_usd"].is_number() ? l["cost_usd"].get<double>() : 0;
    t.known = true;
    return t;
  }
  for (const auto& u : r.llm_usage) {
    t.calls += u.calls;
    t.failed += u.failed_calls;
    t.tokens_in += u.tokens_in;
    t.tokens_out += u.tokens_out;
    t.cost += u.cost_usd;
    t.known = true;
  }
  return t;
}

std::string best_kernel_path(const run_info& r) {
  if (r.summary && r.summary->contains("best_kernel_path") && (*r.summary)["best_kernel_path"].is_string())
    return (*r.summary)["best_kernel_path"].get<std::string>();
  std::error_code ec;
  const auto p = r.path / "output" / "best_kernel.py";
  return fs::exists(p, ec) ? p.string() : "";
}

nlohmann::ordered_json opt(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

/// What program.db knows, in summary.json's keys, for a run that wrote no summary.
nlohmann::ordered_json summary_from_db(const run_info& r) {
  nlohmann::ordered_json j;
  j["run_id"] = r.id;
  j["run_dir"] = r.path.string();
  j["strategy"] = r.strategy.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.strategy);
  j["kernel_dir"] = r.kernel_dir.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.kernel_dir);
  j["best_program_id"] =
      r.best_program_id.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.best_program_id);
  j["best_ms"] = opt(r.best_ms);
  j["initial_ms"] = opt(r.initial_ms);
  j["eager_ms"] = opt(r.eager_ms);
  j["compile_ms"] = opt(r.compile_ms);
  j["speedup_vs_initial"] = opt(speedup(r.initial_ms, r.best_ms));
  j["speedup_vs_eager"] = opt(speedup(r.eager_ms, r.best_ms));
  j["speedup_vs_compile"] = opt(speedup(r.compile_ms, r.best_ms));
  auto cnt = [](const std::optional<std::int64_t>& v) {
    return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
  };
  j["candidates"] = cnt(r.candidates);
  j["verified"] = cnt(r.verified);
  j["failed"] = cnt(r.failed);
  j["pending"] = cnt(r.pending);
  j["failures_by_cause"] = r.failures_by_cause;
  const auto l = llm_of(r);
  j["llm"] = {{"calls", l.calls}, {"failed_calls", l.failed}, {"tokens_in", l.tokens_in},
              {"tokens_out", l.tokens_out}, {"cost_usd", l.cost}};
  auto top = nlohmann::ordered_json::array();
  for (const auto& p : r.top)
    top.push_back({{"program_id", p.id}, {"generation", p.round}, {"time_ms", opt(p.time_ms)}});
  j["top_kernels"] = top;
  return j;
}

void print_human(const run_info& r) {
  auto line = [](const std::string& k, const std::string& v) { std::cout << fmt::format("{:<13} {}\n", k + ":", v); };
  line("run", r.id);
  line("path", r.path.string());
  std::string status = r.status;
  if (r.status == "stopped")
    status += " (killed: its status is running but no process holds the run lock; continue it with "
              "kagent-actors --resume " + r.path.string() + ")";
  else if (r.status == "running" && !r.lock.pid.empty())
    status += " (pid " + r.lock.pid + ")";
  line("status", status);
  std::string strategy = r.strategy.empty() ? "?" : r.strategy;
  if (!r.search.empty() && r.search != r.strategy) strategy += " (" + r.search + ")";
  line("strategy", strategy);
  line("kernel dir", r.kernel_dir.empty() ? "?" : r.kernel_dir);
  const auto best_path = best_kernel_path(r);
  line("best kernel", best_path.empty() ? "(none)"
                                        : best_path + (r.best_program_id.empty() ? "" : " (" + r.best_program_id + ")"));
  if (!r.started.empty()) line("started", r.started + " UTC");
  if (r.summary && r.summary->contains("wall_s") && (*r.summary)["wall_s"].is_number())
    line("wall time", fmt::format("{:.1f} s", (*r.summary)["wall_s"].get<double>()));
  if (r.summary && r.summary->contains("rounds") && (*r.summary)["rounds"].is_number_integer())
    line("rounds", std::to_string((*r.summary)["rounds"].get<int>()));
  else if (auto it = r.state.find("round_done"); it != r.state.end())
    line("rounds done", it->second);

  std::cout << "times:\n";
  std::cout << fmt::format("  {:<8} {:>12}\n", "best", fmt_ms(r.best_ms));
  for (const auto& [name, t] : {std::pair{"initial", r.initial_ms}, {"eager", r.eager_ms}, {"compile", r.compile_ms}})
    std::cout << fmt::format("  {:<8} {:>12}   speed-up of the best {}\n", name, fmt_ms(t), fmt_x(speedup(t, r.best_ms)));

  auto n = [](const std::optional<std::int64_t>& v) { return v ? std::to_string(*v) : std::string("?"); };
  std::string counts = fmt::format("{} (verified {}, failed {}", n(r.candidates), n(r.verified), n(r.failed));
  if (auto it = r.failures_by_cause.find("duplicate"); it != r.failures_by_cause.end())
    counts += fmt::format(", of them duplicates {}", it->second);
  if (r.pending && *r.pending > 0) counts += fmt::format(", pending {}", *r.pending);
  line("candidates", counts + ")");
  if (!r.failures_by_cause.empty()) {
    std::string f;
    for (const auto& [cause, k] : r.failures_by_cause) f += (f.empty() ? "" : ", ") + fmt::format("{} {}", cause, k);
    line("failures", f);
  }
  const auto l = llm_of(r);
  line("LLM", l.known ? fmt::format("{} calls ({} failed), {} tokens in, {} tokens out, est. ${:.4f}", l.calls,
                                    l.failed, l.tokens_in, l.tokens_out, l.cost)
                      : "?");

  std::vector<std::tuple<std::string, std::optional<double>, int>> top;
  for (const auto& p : r.top) top.emplace_back(p.id, p.time_ms, p.round);
  if (top.empty() && r.summary && r.summary->contains("top_kernels") && (*r.summary)["top_kernels"].is_array())
    for (const auto& k : (*r.summary)["top_kernels"])
      if (k.is_object())
        top.emplace_back(k.value("program_id", "?"),
                         k.contains("time_ms") && k["time_ms"].is_number() ? std::optional(k["time_ms"].get<double>())
                                                                             : std::nullopt,
                         k.contains("generation") && k["generation"].is_number_integer() ? k["generation"].get<int>()
                                                                                         : 0);
  if (!top.empty()) {
    size_t w = 0;
    for (const auto& t : top) w = std::max(w, std::get<0>(t).size());
    std::cout << "top kernels:\n";
    int i = 0;
    for (const auto& [id, t, round] : top)
      std::cout << fmt::format("  {}. {:<{}}  {:>12}  {:>7}  round {}\n", ++i, id, w, fmt_ms(t),
                               fmt_x(speedup(r.initial_ms, t)), round);
  }
  if (r.summary && r.summary->contains("error") && (*r.summary)["error"].is_string())
    line("error", (*r.summary)["error"].get<std::string>());
  for (const auto& p : r.problems) line("note", p);
  std::error_code ec;
  if (fs::exists(r.path / "report.html", ec)) line("report", (r.path / "report.html").string());
}

int run_show(const show_options& o) {
  try {
    const auto dir = resolve_run(o.run, o.run_dir);
    const auto r = read_run_info(dir);
    if (o.json) {
      nlohmann::ordered_json j;
      if (r.summary) j = nlohmann::ordered_json::parse(r.summary->dump());
      else j = summary_from_db(r);
      j["status"] = r.status;
      j["db_status"] = r.db_status.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.db_status);
      j["lock_held"] = r.lock.held;
      j["summary_present"] = r.summary.has_value();
      j["problems"] = r.problems;
      std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      return 0;
    }
    print_human(r);
    return 0;
  } catch (const user_error& e) {
    std::cerr << "kagent-actors: error: show: " << e.what() << "\n";
    return 2;
  }
}

const register_command show_command{"show", [](CLI::App& root, int& exit_code) {
  auto opts = std::make_shared<show_options>();
  auto* sub = root.add_subcommand("show", "show one run's summary: times, speed-ups, candidates, failures, LLM cost");
  sub->add_option("RUN", opts->run, "a run directory, or a run id (or unique prefix) under --run-dir")->required();
  auto* dir = sub->add_option("--run-dir", opts->run_dir, "where run ids are looked up")->capture_default_str();
  // `kagent-actors --run-dir X NAME RUN` means the same as `NAME RUN --run-dir X`.
  auto* root_dir = root.get_option_no_throw("--run-dir");
  sub->add_flag("--json", opts->json, "print summary.json with the database's status added");
  sub->callback([opts, dir, root_dir, &exit_code] {
    if (dir->count() == 0 && root_dir && root_dir->count() > 0) opts->run_dir = root_dir->as<std::string>();
    exit_code = run_show(*opts);
  });
}};

}  // namespace
}  // namespace kagent::app
