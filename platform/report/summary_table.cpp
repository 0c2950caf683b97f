#include "platform/report/summary_table.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "platform/report/text.hpp"

namespace kagent::report {

namespace {

std::string count_or_na(const nlohmann::json& s, const char* key) {
  auto v = finite_number(s, key);
  if (!v || *v < 0) return "n/a";
  return std::to_string(static_cast<long long>(std::llround(*v)));
}

std::string device_label(const std::string& id) {
  const bool numeric = !id.empty() && std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; });
  return numeric ? "gpu" + id : id;
}

std::string id_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_object() && v.contains("gpu_id")) return id_text(v["gpu_id"]);  // {"gpu_id": 1, "reason": ...}
  return "";
}

} // namespace

std::vector<std::string> synthetic_devices_of(const nlohmann::json& s) {
  std::vector<std::string> out;
  if (!s.is_object()) return out;
  auto add = [&](const std::string& id) {
    const auto label = device_label(id);
    if (!id.empty() && std::find(out.begin(), out.end(), label) == out.end()) out.push_back(label);
  };
  for (const char* key : {"synthetic_devices", "devices_synthetic"}) {
    if (s.contains(key) && s[key].is_array())
      for (const auto& v : s[key]) add(id_text(v));
  }
  for (const char* key : {"analysis_mode", "analysis_modes"}) {
    if (!s.contains(key) || !s[key].is_object()) continue;
    for (auto it = s[key].begin(); it != s[key].end(); ++it)
      if (it.value().is_string() && it.value().get<std::string>() == "synthetic") add(it.key());
  }
  return out;
}

summary_view make_summary_view(const nlohmann::json& s_in) {
  const nlohmann::json s = s_in.is_object() ? s_in : nlohmann::json::object();
  summary_view v;
  const auto strategy = text_of(s, "strategy"), search = text_of(s, "search"), kdir = text_of(s, "kernel_dir");
  v.title = strategy.empty() ? "run" : strategy;
  if (!search.empty()) v.title += " (" + search + ")";
  if (!kdir.empty()) v.title += " on " + kdir;
  v.success = s.contains("success") && s["success"].is_boolean() && s["success"].get<bool>();
  v.error = text_of(s, "error");
  if (!v.success && v.error.empty()) v.error = s.contains("success") ? "no verified kernel" : "the run left no summary";

  const auto best = positive_ms(s, "best_ms");
  auto row = [&](const char* label, const char* key, const char* speedup_key) {
    const auto t = positive_ms(s, key);
    std::string sp = format_speedup(t, best);
    if (sp == "n/a" && best) {
      if (auto given = finite_number(s, speedup_key); given && *given > 0) sp = fmt::format("{:.2f}x", *given);
    }
    v.timings.push_back({label, format_ms(t), sp});
  };
  // References read from the reference cache (a run before this one timed them) say so.
  const bool cached = !text_of(s, "references_cached_at").empty();
  row(cached ? "PyTorch eager (cached)" : "PyTorch eager", "eager_ms", "speedup_vs_eager");
  row(cached ? "torch.compile (cached)" : "torch.compile", "compile_ms", "speedup_vs_compile");
  row("starting kernel", "initial_ms", "speedup_vs_initial");
  v.timings.push_back({"best kernel", format_ms(best), best ? "1.00x" : "n/a"});
  v.best_program_id = best ? text_of(s, "best_program_id") : "";

  v.rounds = count_or_na(s, "rounds");
  v.candidates = count_or_na(s, "candidates");
  v.verified = count_or_na(s, "verified");
  v.failed = count_or_na(s, "failed");
  v.duplicates = count_or_na(s, "duplicates");
  v.interrupted = s.value("interrupted", false);
  if (s.contains("failures_by_cause") && s["failures_by_cause"].is_object()) {
    std::vector<std::pair<std::string, long long>> causes;
    for (auto it = s["failures_by_cause"].begin(); it != s["failures_by_cause"].end(); ++it) {
      auto n = finite_number(it.value());
      // A duplicate is counted on its own (summaries from before that count listed it as a cause).
      if (it.key() == "duplicate" && s.contains("duplicates")) continue;
      if (n && *n > 0) causes.emplace_back(it.key(), std::llround(*n));
    }
    std::stable_sort(causes.begin(), causes.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    for (const auto& [cause, n] : causes) v.failures_by_cause.emplace_back(cause, std::to_string(n));
  }
  if (s.contains("llm") && s["llm"].is_object()) {
    const auto& l = s["llm"];
    v.llm_calls = count_or_na(l, "calls");
    v.llm_failed_calls = count_or_na(l, "failed_calls");
    v.llm_tokens_in = count_or_na(l, "tokens_in");
    v.llm_tokens_out = count_or_na(l, "tokens_out");
    v.llm_cost = format_usd(finite_number(l, "cost_usd"));
  } else {
    v.llm_calls = v.llm_failed_calls = v.llm_tokens_in = v.llm_tokens_out = v.llm_cost = "n/a";
  }
  v.synthetic_devices = synthetic_devices_of(s);
  auto wall = finite_number(s, "wall_s");
  v.wall_time = wall ? format_duration(*wall) : "n/a";
  if (auto dev = finite_number(s, "device_s"); dev && *dev >= 0) {
    v.device_time = fmt::format("{:.1f} s", *dev);
    const auto n = finite_number(s, "candidates");
    if (n && *n >= 1) v.device_time += fmt::format(", {:.2f} s per candidate", *dev / *n);
    if (auto busy = finite_number(s, "gpu_busy_pct")) v.device_time += fmt::format(", GPU busy {:.0f}%", *busy);
    if (auto tested = finite_number(s, "user_test_s"); tested && *tested > 0 && *tested <= *dev) {
      v.user_test_s = *tested;
      v.device_time += fmt::format(", of it the kernel directory's test.py {:.1f} s", *tested);
    }
  }
  v.best_kernel_path = text_of(s, "best_kernel_path");
  v.run_dir = text_of(s, "run_dir");
  return v;
}

std::string format_summary_table(const nlohmann::json& summary) {
  const auto v = make_summary_view(summary);
  std::string out = "\n== kagent-actors summary: " + v.title + "\n";
  out += fmt::format("  {:<22} {:>14}  {:>16}\n", "", "time", "best speed-up");
  for (const auto& r : v.timings) {
    std::string label = r.label;
    if (label == "best kernel" && !v.best_program_id.empty()) label += " (" + v.best_program_id + ")";
    out += fmt::format("  {:<22} {:>14}  {:>16}\n", one_line(label, 22), r.time, r.speedup);
  }
  out += fmt::format("  rounds {}  candidates {}  verified {}  failed {}{}  wall time {}\n", v.rounds, v.candidates,
                     v.verified, v.failed, v.duplicates == "n/a" ? "" : "  duplicates " + v.duplicates, v.wall_time);
  std::vector<std::string> causes;
  for (const auto& [cause, n] : v.failures_by_cause) causes.push_back(cause + "=" + n);
  out += "  failures by cause: " + (causes.empty() ? std::string("none") : fmt::format("{}", fmt::join(causes, ", "))) + "\n";
  out += fmt::format("  LLM: {} calls ({} failed), {} tokens in, {} tokens out, est. {}\n", v.llm_calls,
                     v.llm_failed_calls, v.llm_tokens_in, v.llm_tokens_out, v.llm_cost);
  // Several models (strategy_config.models): each one's share, with the provider it went to.
  if (summary.contains("llm") && summary["llm"].is_object() && summary["llm"].contains("by_model") &&
      summary["llm"]["by_model"].is_array() && summary["llm"]["by_model"].size() > 1)
    for (const auto& m : summary["llm"]["by_model"])
      out += fmt::format("    {} ({}): {} calls ({} failed), {} tokens in, {} tokens out, est. {}\n",
                         text_of(m, "model").empty() ? "(unknown)" : text_of(m, "model"),
                         text_of(m, "provider").empty() ? "?" : text_of(m, "provider"), int_or(m, "calls", 0),
                         int_or(m, "failed_calls", 0), int_or(m, "tokens_in", 0), int_or(m, "tokens_out", 0),
                         format_usd(finite_number(m, "cost_usd").value_or(0)));
  if (!v.device_time.empty()) out += "  device time: " + v.device_time + "\n";
  // Launch-constant variants run while the LLM thought (tune_variants); none: no line.
  if (summary.contains("variants") && summary["variants"].is_object() && int_or(summary["variants"], "run", 0) > 0)
    out += fmt::format("  launch-constant variants: {} run, {} verified{}\n", int_or(summary["variants"], "run", 0),
                       int_or(summary["variants"], "verified", 0),
                       text_of(summary, "best_tune").empty() ? "" : "; the best is one (" + text_of(summary, "best_tune") + ")");
  out += "  devices in synthetic mode: " +
         (v.synthetic_devices.empty() ? std::string("none") : fmt::format("{}", fmt::join(v.synthetic_devices, ", "))) + "\n";
  out += "  best kernel: " + (v.best_kernel_path.empty() ? std::string("(none)") : v.best_kernel_path) + "\n";
  out += "  run directory: " + (v.run_dir.empty() ? std::string("n/a") : v.run_dir) + "\n";
  if (v.interrupted) out += "  INTERRUPTED: " + v.error + " (resume: " + text_of(summary, "resume_command") + ")\n";
  else if (!v.success) out += "  FAILED: " + v.error + "\n";
  return out;
}

} // namespace kagent::report
