#include "platform/report/progress.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "platform/report/text.hpp"
#include "platform/store/sessions.hpp"

namespace kagent::report {

namespace {

void note_best(progress_state& st, const nlohmann::json& p, std::string_view key) {
  auto v = positive_ms(p, key);
  if (v && (!st.best_ms || *v < *st.best_ms)) st.best_ms = v;
}

void add_call(llm_tally& t, const nlohmann::json& p) {
  ++t.calls;
  if (p.is_object() && p.contains("ok") && p["ok"].is_boolean() && !p["ok"].get<bool>()) ++t.failed_calls;
  t.tokens_in += std::max<std::int64_t>(0, int_or(p, "tokens_in", 0));
  t.tokens_out += std::max<std::int64_t>(0, int_or(p, "tokens_out", 0));
  t.cost_usd += std::max(0.0, finite_number(p, "cost_usd").value_or(0));
}

std::optional<int> gpu_of(const nlohmann::json& p) {
  auto v = finite_number(p, "gpu_id");
  if (!v) return std::nullopt;
  return static_cast<int>(*v);
}

std::string gpu_name_of(const progress_state& st, int g) {
  auto it = st.labels.find(g);
  return it != st.labels.end() ? it->second : fmt::format("gpu{}", g);
}

std::string gpu_label(const progress_state& st, const nlohmann::json& p) {
  auto g = gpu_of(p);
  return g ? gpu_name_of(st, *g) : std::string("gpu?");
}

std::string speedup_suffix(const progress_state& st) {
  const auto s = format_speedup(st.initial_ms, st.best_ms);
  return s == "n/a" ? "" : " (" + s + ")";
}

std::string modes_text(const progress_state& st, bool compact) {
  std::vector<std::string> parts;
  std::map<std::string, int> per_mode;
  for (const auto& [gpu, mode] : st.modes) {
    if (mode.empty() || mode == "profiled") continue;
    parts.push_back(fmt::format("{}: {}", gpu_name_of(st, gpu), mode));
    ++per_mode[mode];
  }
  if (parts.empty()) return "";
  if (!compact && parts.size() <= 2) return fmt::format("{}", fmt::join(parts, ", "));
  std::vector<std::string> counts;
  for (const auto& [mode, n] : per_mode) counts.push_back(fmt::format("{} GPU{} {}", n, n == 1 ? "" : "s", mode));
  return fmt::format("{}", fmt::join(counts, ", "));
}

} // namespace

int progress_state::running() const {
  if (saw_candidate_start) return static_cast<int>(in_flight.size());
  if (schedule == "async") return 0;
  return std::max(0, round_candidates - round_results);
}

llm_tally progress_state::llm() const {
  llm_tally best;
  auto take = [&](const llm_tally& t) {
    best.calls = std::max(best.calls, t.calls);
    best.failed_calls = std::max(best.failed_calls, t.failed_calls);
    best.tokens_in = std::max(best.tokens_in, t.tokens_in);
    best.tokens_out = std::max(best.tokens_out, t.tokens_out);
    best.cost_usd = std::max(best.cost_usd, t.cost_usd);
  };
  take(llm_calls);
  if (llm_run_totals) take(*llm_run_totals);
  return best;
}

std::optional<double> progress_state::gpu_busy_pct(double now_s) const {
  if (!saw_device_s || t_start_s < 0) return std::nullopt;
  const double wall = now_s - t_start_s;
  return store::busy_pct(prior_device_s + device_s, prior_capacity_s + std::max(0.0, wall) * std::max(1, devices));
}

void update(progress_state& st, const std::string& type, const nlohmann::json& p, double t_s) {
  if (st.t_start_s < 0) st.t_start_s = t_s;
  st.t_last_s = t_s;
  if (type == "run_start") {
    st.t_start_s = t_s;
    st.strategy = text_of(p, "strategy");
    if (p.is_object() && p.contains("vendor")) st.gpu = !text_of(p, "vendor").empty();
    st.search = text_of(p, "search");
    if (p.is_object() && p.contains("schedule") && p["schedule"].is_string() && !p["schedule"].get<std::string>().empty())
      st.schedule = p["schedule"].get<std::string>();
    if (p.is_object() && p.contains("devices") && p["devices"].is_array())
      st.devices = static_cast<int>(p["devices"].size());
    st.max_rounds = static_cast<int>(int_or(p, "max_rounds", st.max_rounds));
    st.max_candidates = static_cast<int>(int_or(p, "max_candidates", st.max_candidates));
    st.slots = static_cast<int>(int_or(p, "slots", int_or(p, "num_workers", st.slots)));
    st.slots_auto = flag_of(p, "num_workers_auto");
    note_best(st, p, "initial_ms");
    if (auto v = positive_ms(p, "initial_ms")) st.initial_ms = v;
    if (p.is_object() && p.contains("device_labels") && p["device_labels"].is_object())
      for (const auto& [id, label] : p["device_labels"].items())
        if (label.is_string() && !id.empty() && id.find_first_not_of("0123456789") == std::string::npos && id.size() < 9)
          st.labels[std::stoi(id)] = label.get<std::string>();
  } else if (type == "node_down") {
    ++st.devices_lost;
  } else if (type == "node_up") {
    // A node's devices joined: late, or again after it was lost (with new ids).
    if (auto g = gpu_of(p); g && !text_of(p, "device").empty()) st.labels[*g] = text_of(p, "device");
    ++st.devices;
  } else if (type == "concurrency") {
    // num_workers: auto re-sized the pipelines in flight from measured LLM and device time.
    st.slots = static_cast<int>(int_or(p, "num_workers", st.slots));
    st.slots_auto = true;
  } else if (type == "initial") {
    st.initial_step.clear();
    // The starting kernel's evaluation (verification, timings, the user's test.py) held the device.
    if (auto d = finite_number(p, "device_s"); d && *d >= 0) {
      st.device_s += *d;
      st.saw_device_s = true;
    }
    if (auto v = positive_ms(p, "initial_ms")) st.initial_ms = v;
    note_best(st, p, "initial_ms");
    note_best(st, p, "best_ms");
  } else if (type == "start_checked") {
    // The starting kernel's test.py and reference timings, run while its analysis waited for the LLM.
    if (auto d = finite_number(p, "device_s"); d && *d >= 0) {
      st.device_s += *d;
      st.saw_device_s = true;
    }
  } else if (type == "initial_step") {
    st.initial_step = text_of(p, "step");
  } else if (type == "round_start") {
    st.initial_step.clear();
    st.round = static_cast<int>(int_or(p, "round", st.round + 1));
    st.max_rounds = static_cast<int>(int_or(p, "max_rounds", st.max_rounds));
    st.round_candidates = static_cast<int>(int_or(p, "candidates", 0));
    st.round_results = 0;
  } else if (type == "candidate_start" && p.contains("tune")) {
    st.variant_ids.insert(text_of(p, "candidate_id"));
  } else if (type == "candidate_start") {
    st.saw_candidate_start = true;
    if (auto id = text_of(p, "candidate_id"); !id.empty()) st.in_flight.insert(id);
    if (st.schedule == "async") st.round = std::max(st.round, static_cast<int>(int_or(p, "round", 0)));
  } else if (type == "candidate_result") {
    const bool ok = flag_of(p, "ok");
    if (st.variant_ids.erase(text_of(p, "candidate_id"))) {
      ++st.variants_done;
      st.variants_ok += ok;
    } else {
      if (ok) ++st.ok;
      else if (text_of(p, "failure_cause") == "duplicate") ++st.duplicates;
      else ++st.failed;
      ++st.round_results;
      // A candidate recorded before its reflexion keeps its slot until its candidate_end.
      const bool reflecting = flag_of(p, "reflexion_pending");
      if (!reflecting) st.in_flight.erase(text_of(p, "candidate_id"));
    }
    if (auto d = finite_number(p, "device_s"); d && *d >= 0) {
      st.device_s += *d;
      st.saw_device_s = true;
    }
    if (auto l = finite_number(p, "llm_s"); l && *l >= 0) st.llm_s += *l;
    if (ok) note_best(st, p, "time_ms");
    note_best(st, p, "best_ms");
    if (st.schedule == "async") st.round = std::max(st.round, static_cast<int>(int_or(p, "round", 0)));
  } else if (type == "candidate_end") {
    // The pipeline of a candidate recorded before its reflexion ended: its slot is free.
    st.in_flight.erase(text_of(p, "candidate_id"));
    if (auto d = finite_number(p, "device_s"); d && *d > 0) {
      st.device_s += *d;
      st.saw_device_s = true;
    }
    if (auto l = finite_number(p, "llm_s"); l && *l >= 0) st.llm_s += *l;
  } else if (type == "analysis") {
    // A parent's profile and diagnosis: device time that belongs to no candidate.
    if (auto d = finite_number(p, "device_s"); d && *d >= 0) {
      st.device_s += *d;
      st.saw_device_s = true;
    }
  } else if (type == "round_end") {
    note_best(st, p, "best_ms");
    if (auto id = text_of(p, "best_program_id"); !id.empty()) st.best_program_id = id;
  } else if (type == "llm_call") {
    add_call(st.llm_calls, p);
    if (p.is_object() && p.contains("run_totals") && p["run_totals"].is_object()) {
      const auto& t = p["run_totals"];
      llm_tally tot;
      tot.calls = st.llm_calls.calls;
      tot.tokens_in = int_or(t, "tokens_in", 0);
      tot.tokens_out = int_or(t, "tokens_out", 0);
      tot.cost_usd = finite_number(t, "cost_usd").value_or(0);
      st.llm_run_totals = tot;
    }
  } else if (type == "mode_change") {
    if (auto g = gpu_of(p)) st.modes[*g] = text_of(p, "mode");
  } else if (type == "profiling_failed") {
    ++st.profiling_failures;
  } else if (type == "error") {
    ++st.errors;
  } else if (type == "resume") {
    st.round = static_cast<int>(int_or(p, "from_round", st.round));
    // The run's counts so far come from program.db; the earlier sessions' time from `prior`. A
    // report replaying every session's events gets the same totals: the first session's device
    // seconds are in `prior`, so this session's count starts again.
    st.ok = static_cast<int>(int_or(p, "verified", st.ok));
    st.failed = static_cast<int>(int_or(p, "failed", st.failed));
    st.duplicates = static_cast<int>(int_or(p, "duplicates", st.duplicates));
    if (p.is_object() && p.contains("prior") && p["prior"].is_object()) {
      const auto& pr = p["prior"];
      st.prior_wall_s = std::max(0.0, finite_number(pr, "wall_s").value_or(0));
      st.prior_device_s = std::max(0.0, finite_number(pr, "device_s").value_or(0));
      st.prior_capacity_s = std::max(0.0, finite_number(pr, "capacity_s").value_or(0));
      st.device_s = 0;
      st.saw_device_s = st.saw_device_s || st.prior_device_s > 0;
    }
  } else if (type == "run_end") {
    st.finished = true;
    st.success = flag_of(p, "success");
    note_best(st, p, "best_ms");
  }
}

std::size_t progress_columns(int terminal_columns, const char* env_columns) {
  long cols = terminal_columns;
  if (cols <= 0 && env_columns && *env_columns) {
    char* end = nullptr;
    const long v = std::strtol(env_columns, &end, 10);
    if (end && *end == '\0' && v > 0 && v < 100000) cols = v;
  }
  if (cols <= 0) cols = 80;
  return std::clamp<std::size_t>(static_cast<std::size_t>(cols - 1), progress_line_min_columns, progress_line_columns);
}

std::string format_progress_line(const progress_state& st, double now_s, std::size_t columns) {
  std::vector<std::string> parts;
  const double elapsed = st.prior_wall_s + (st.t_start_s >= 0 ? now_s - st.t_start_s : 0);
  std::string where;
  if (st.schedule == "async") {
    where = st.max_candidates > 0 ? fmt::format("async {}/{}", st.results(), st.max_candidates)
                                  : fmt::format("async gen {}", st.round);
  } else if (st.round == 0) {
    where = !st.initial_step.empty() ? "initial: " + st.initial_step : st.initial_ms ? "initial done" : "initial kernel";
  } else {
    where = st.max_rounds > 0 ? fmt::format("round {}/{}", st.round, st.max_rounds) : fmt::format("round {}", st.round);
  }
  if (st.finished) where += st.success ? " finished" : " FAILED";
  parts.push_back(format_duration(elapsed) + " " + where);

  std::string cands = fmt::format("{} ok, {} failed", st.ok, st.failed);
  if (st.duplicates > 0) cands += fmt::format(", {} dup", st.duplicates);
  const int running = st.running();
  if (st.slots > 0 && st.saw_candidate_start)
    cands += fmt::format(", {}/{}{} running", running, st.slots, st.slots_auto ? " (auto)" : "");
  else cands += fmt::format(", {} running", running);
  parts.push_back(cands);
  if (st.variants_done > 0 || !st.variant_ids.empty())
    parts.push_back(fmt::format("variants {} ok of {}{}", st.variants_ok, st.variants_done,
                                st.variant_ids.empty() ? "" : fmt::format(", {} running", st.variant_ids.size())));

  parts.push_back("best " + format_ms(st.best_ms) + speedup_suffix(st));
  if (st.devices_lost > 0)
    parts.push_back(fmt::format("{} of {} device{} lost", st.devices_lost, st.devices, st.devices == 1 ? "" : "s"));

  const char* what = st.gpu ? "GPU" : "device";
  if (auto busy = st.gpu_busy_pct(now_s)) parts.push_back(fmt::format("{} {:.0f}%", what, *busy));
  else parts.push_back(fmt::format("{} n/a", what));

  const auto l = st.llm();
  parts.push_back(fmt::format("LLM {} tok {}", format_count(l.tokens_in + l.tokens_out), format_usd(l.cost_usd)));

  auto join = [&](const std::string& modes) {
    std::string line = fmt::format("{}", fmt::join(parts, " | "));
    if (!modes.empty()) line += " | " + modes;
    return line;
  };
  std::string line = join(modes_text(st, false));
  if (line.size() <= columns) return line;
  // Too wide: count the modes instead of listing them; then leave out the LLM tally and the busy
  // figure (the summary has both), then cut the middle rather than the modes, which say that
  // results from here on are less trustworthy.
  const auto modes = modes_text(st, true);
  line = join(modes);
  for (int drop = 0; drop < 2 && line.size() > columns && parts.size() > 3; ++drop) {
    parts.pop_back();
    line = join(modes);
  }
  if (line.size() <= columns) return line;
  if (modes.empty()) return one_line(line, columns);
  const std::string tail = " | " + modes;
  if (tail.size() + 8 >= columns) return one_line(line, columns);
  return one_line(join(""), columns - tail.size()) + tail;
}

std::optional<std::string> format_log_line(const progress_state& st, const std::string& type, const nlohmann::json& p,
                                           double t_s, bool verbose) {
  const std::string stamp = "[" + format_duration(st.prior_wall_s + (st.t_start_s >= 0 ? t_s - st.t_start_s : 0)) + "] ";
  auto say = [&](const std::string& text) { return std::optional<std::string>(stamp + one_line(text, 600)); };
  if (type == "run_start") {
    std::string devices;
    if (p.is_object() && p.contains("devices") && p["devices"].is_array()) devices = p["devices"].dump();
    std::string llm;
    if (p.is_object() && p.contains("llm") && p["llm"].is_object()) {
      const auto& l = p["llm"];
      const std::string prov = text_of(l, "provider");
      llm = fmt::format(", LLM {} {}{}{}", prov.empty() ? "?" : prov, text_of(l, "model"),
                        text_of(l, "endpoint").empty() ? "" : (prov == "replay" ? " from " : " at ") + text_of(l, "endpoint"),
                        text_of(l, "key_env").empty() ? "" : " (key from " + text_of(l, "key_env") + ")");
      if (p.contains("llm_models") && p["llm_models"].is_array())
        for (const auto& m : p["llm_models"]) {
          const std::string mp = text_of(m, "provider");
          llm += fmt::format("; {} via {}{}{}", text_of(m, "model"), mp.empty() ? "?" : mp,
                             text_of(m, "endpoint").empty() ? "" : (mp == "replay" ? " from " : " at ") + text_of(m, "endpoint"),
                             text_of(m, "key_env").empty() ? "" : " (key from " + text_of(m, "key_env") + ")");
        }
    }
    return say(fmt::format("run start: strategy {} ({}{}), devices {}{}, platform {}, max rounds {}, kernel {}{}",
                           text_of(p, "strategy").empty() ? "?" : text_of(p, "strategy"), text_of(p, "search"),
                           st.schedule == "rounds" ? "" : ", " + st.schedule, devices.empty() ? "n/a" : devices,
                           text_of(p, "gpu_name").empty() ? "" : " " + text_of(p, "gpu_name"),
                           text_of(p, "platform").empty() ? "n/a" : text_of(p, "platform"),
                           st.max_rounds > 0 ? std::to_string(st.max_rounds) : "n/a", text_of(p, "kernel_dir"),
                           text_of(p, "sandbox").empty() ? "" : ", sandbox " + text_of(p, "sandbox") +
                               (text_of(p, "sandbox_warning").empty() ? "" : " (" + text_of(p, "sandbox_warning") + ")")) +
               llm);
  }
  // A new run times its references later (start_checked); a resumed run's initial event has them.
  if (type == "initial" && !(p.is_object() && p.contains("eager_ms")))
    return say(fmt::format("starting kernel {}", format_ms(positive_ms(p, "initial_ms"))));
  if (type == "initial")
    return say(fmt::format("starting kernel {} (PyTorch eager {}, torch.compile {})",
                           format_ms(positive_ms(p, "initial_ms")), format_ms(positive_ms(p, "eager_ms")),
                           format_ms(positive_ms(p, "compile_ms"))));
  if (type == "start_checked")
    return say(fmt::format("starting kernel checked: test.py {}, PyTorch eager {}, torch.compile {}{}",
                           text_of(p, "user_test").empty() ? "n/a" : text_of(p, "user_test"),
                           format_ms(positive_ms(p, "eager_ms")), format_ms(positive_ms(p, "compile_ms")),
                           text_of(p, "references_cached_at").empty()
                               ? std::string{}
                               : " (from the reference cache, timed " + text_of(p, "references_cached_at") + ")"));
  if (type == "round_start")
    return say(fmt::format("round {}{}: {} candidates", st.round, st.max_rounds > 0 ? fmt::format("/{}", st.max_rounds) : "",
                           int_or(p, "candidates", 0)));
  if (type == "candidate_result") {
    const bool ok = flag_of(p, "ok");
    std::string who = text_of(p, "candidate_id");
    if (who.empty()) who = "candidate";
    if (gpu_of(p)) who += " (" + gpu_label(st, p) + ")";
    const bool new_best = flag_of(p, "new_best");
    if (ok)
      return say(fmt::format("{}: {}{}{}, best {}{} [{} ok, {} failed]", who, format_ms(positive_ms(p, "time_ms")),
                             finite_number(p, "spread_pct") ? fmt::format(" (IQR {:.1f}%)", *finite_number(p, "spread_pct")) : "",
                             new_best ? " NEW BEST" : "", format_ms(st.best_ms), speedup_suffix(st), st.ok, st.failed));
    std::string cause = text_of(p, "failure_cause");
    std::string err = text_of(p, "error");
    if (cause == "duplicate")
      return say(fmt::format("{}: duplicate{}{} [{} ok, {} failed, {} dup]", who, err.empty() ? "" : ": ", one_line(err, 160),
                             st.ok, st.failed, st.duplicates));
    return say(fmt::format("{}: failed ({}){}{} [{} ok, {} failed]", who, cause.empty() ? "unknown" : cause,
                           err.empty() ? "" : ": ", brief_error(err, 160), st.ok, st.failed));
  }
  if (type == "round_end")
    return say(fmt::format("round {} done: best {}{}{}", int_or(p, "round", st.round), format_ms(st.best_ms),
                           speedup_suffix(st),
                           text_of(p, "best_program_id").empty() ? "" : " by " + text_of(p, "best_program_id")) +
               " | " + format_progress_line(st, t_s));
  if (type == "node_up")
    return say(fmt::format("{} joined the run ({})", text_of(p, "device").empty() ? gpu_label(st, p) : text_of(p, "device"),
                           text_of(p, "name").empty() ? "?" : text_of(p, "name")) +
               " | " + format_progress_line(st, t_s));
  if (type == "node_down")
    return say(fmt::format("{} lost with its node ({}): {} candidate{} back in the queue, {} device{} left",
                           text_of(p, "device").empty() ? gpu_label(st, p) : text_of(p, "device"),
                           one_line(text_of(p, "reason"), 120), int_or(p, "requeued", 0),
                           int_or(p, "requeued", 0) == 1 ? "" : "s", int_or(p, "devices_left", 0),
                           int_or(p, "devices_left", 0) == 1 ? "" : "s") +
               " | " + format_progress_line(st, t_s));
  if (type == "mode_change") {
    std::string reason = text_of(p, "reason");
    return say(fmt::format("{}: {} analysis from now on{}{}", gpu_label(st, p),
                           text_of(p, "mode").empty() ? "?" : text_of(p, "mode"), reason.empty() ? "" : ": ",
                           one_line(reason, 200)));
  }
  if (type == "profiling_failed")
    return say(fmt::format("{}: profiling failed{}{}: {}", gpu_label(st, p),
                           text_of(p, "candidate_id").empty() ? "" : " for " + text_of(p, "candidate_id"),
                           text_of(p, "platform").empty() ? "" : " (" + text_of(p, "platform") + ")",
                           one_line(text_of(p, "reason"), 200)));
  if (type == "note" || type == "error") {
    nlohmann::json rest = p.is_object() ? p : nlohmann::json::object();
    std::string what = text_of(rest, "what");
    rest.erase("what");
    return say(fmt::format("{}: {}{}", type, what.empty() ? "(no description)" : what,
                           rest.empty() ? "" : " " + rest.dump()));
  }
  if (type == "resume") {
    std::string before;
    if (p.is_object() && p.contains("prior") && p["prior"].is_object())
      before = fmt::format(" (session {}; so far {} verified, {} failed over {})",
                           int_or(p["prior"], "sessions", 0) + 1, st.ok, st.failed, format_duration(st.prior_wall_s));
    return say(fmt::format("resume from round {}, {} pending{}", int_or(p, "from_round", 0),
                           p.is_object() && p.contains("pending") && p["pending"].is_array()
                               ? std::to_string(p["pending"].size())
                               : text_of(p, "pending").empty() ? "0" : text_of(p, "pending"),
                           before));
  }
  if (type == "run_end") {
    std::string err = text_of(p, "error");
    if (text_of(p, "run_state") == "interrupted")
      return say(fmt::format("run end: INTERRUPTED, best so far {}{}{}", format_ms(st.best_ms), speedup_suffix(st),
                             err.empty() ? "" : ": " + err));
    return say(fmt::format("run end: {}, best {}{}{}", st.success ? "success" : "FAILED", format_ms(st.best_ms),
                           speedup_suffix(st), err.empty() ? "" : ": " + err));
  }
  if (!verbose) return std::nullopt;
  if (type == "candidate_start")
    return say(fmt::format("{} started on {} (parent {}{})", text_of(p, "candidate_id"), gpu_label(st, p),
                           text_of(p, "parent_id").empty() ? "?" : text_of(p, "parent_id"),
                           p.contains("tune") ? ", variant " + text_of(p, "tune") : ""));
  if (type == "candidate_end") {
    const bool reflexion = flag_of(p, "reflexion");
    const std::string err = text_of(p, "error");
    return say(fmt::format("{} done ({}){}", text_of(p, "candidate_id"), reflexion ? "reflexion kept" : "no reflexion",
                           err.empty() ? "" : ": " + one_line(err, 160)));
  }
  if (type == "llm_call")
    return say(fmt::format("LLM {} {}{} {}: {} in, {} out, {}", text_of(p, "purpose"), text_of(p, "model"),
                           text_of(p, "provider").empty() ? "" : " via " + text_of(p, "provider"),
                           text_of(p, "ok") == "false" ? "failed" : "ok", int_or(p, "tokens_in", 0),
                           int_or(p, "tokens_out", 0), format_usd(finite_number(p, "cost_usd"))));
  return say(type + ": " + p.dump());
}

} // namespace kagent::report
