#include "app/plan_command.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "actors/runtime.hpp"
#include "app/startup_checks.hpp"
#include "platform/common/env.hpp"
#include "platform/common/errors.hpp"
#include "platform/gpu/selection.hpp"
#include "platform/llm/retry.hpp"

namespace fs = std::filesystem;

namespace kagent::app {

namespace {

std::vector<std::string> models_of(const run_config& cfg) {
  const std::string run_model = cfg.llm.model.empty() ? cfg.openai_model : cfg.llm.model;
  if (cfg.strategy == "greedy" || cfg.strategy_cfg.models.empty())
    return {cfg.strategy_cfg.models.empty() ? run_model : cfg.strategy_cfg.models.front()};
  return cfg.strategy_cfg.models;
}

/// Parents a beam-search round expands, at most (actors/strategy.cpp).
long beam_parents(const strategy_config& sc) {
  return sc.num_expanding_parents > 0 ? std::min(sc.num_expanding_parents, sc.num_top_kernels) : sc.num_top_kernels;
}

struct named_config {
  std::string name;
  run_config cfg;
};

std::vector<named_config> resolve_configs(const run_options& o, const std::function<void(run_config&)>& apply) {
  std::vector<named_config> out;
  if (!o.resume.empty()) {
    if (o.strategy == "all") throw user_error("--resume cannot be combined with --strategy all");
    check_resume_dir(o.resume);
    auto target = read_resume_target(o.resume, o.max_rounds != run_options::unset ? o.max_rounds : 0);
    auto cfg = load_config_file(target.config_path);
    if (!target.strategy_name.empty()) cfg.name = target.strategy_name;
    out.push_back({cfg.name, std::move(cfg)});
  } else if (o.strategy == "all") {
    for (const auto& [name, path] : discover_strategies(config_search_dirs())) out.push_back({name, load_config_file(path)});
  } else {
    auto cfg = load_strategy(o.strategy, config_search_dirs());
    out.push_back({cfg.name.empty() ? o.strategy : cfg.name, std::move(cfg)});
  }
  for (auto& c : out) apply(c.cfg);
  return out;
}

uintmax_t file_chars(const std::string& dir, const char* name, uintmax_t fallback) {
  if (dir.empty()) return fallback;
  std::error_code ec;
  const auto n = fs::file_size(fs::path(dir) / name, ec);
  return ec ? fallback : n;
}

std::string thousands(double v) {
  if (v >= 1e6) return fmt::format("{:.1f}M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.0f}k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

void print_plan(const named_config& nc, const run_options& o) {
  const auto& cfg = nc.cfg;
  const auto& sc = cfg.strategy_cfg;
  auto line = [](const std::string& k, const std::string& v) { std::cout << fmt::format("{:<15} {}\n", k + ":", v); };
  const auto models = models_of(cfg);
  const auto b = bound_llm_calls(cfg);

  line("strategy", nc.name + (cfg.source_path.empty() ? "" : " (" + cfg.source_path + ")"));
  if (cfg.strategy == "greedy")
    line("search", fmt::format("greedy, schedule {}: one candidate per round from the best kernel; stops after {} "
                               "round(s) without improvement",
                               sc.schedule, sc.max_no_improvement));
  else
    line("search", fmt::format("beam_search, schedule {}: beam of {} kernels; a round expands up to {} parents x {} "
                               "bottlenecks x {} model(s) x {} sample(s)",
                               sc.schedule, sc.num_top_kernels, beam_parents(sc), sc.num_bottlenecks, models.size(),
                               sc.samples_per_prompt));
  line("platform", cfg.platform.uniform() + (cfg.platform.given ? "" : " (not given: detection decides)"));

  // Devices: what the run's GPU selection would say, without starting anything.
  try {
    const auto env = current_environment();
    auto sel = detect_gpus({cfg.platform, cfg.gpu_ids}, env, tool_locations::from_env(env, cfg.python));
    std::string names;
    for (const auto& d : sel.devices)
      if (!d.name.empty()) names += (names.empty() ? "" : ", ") + fmt::format("{}: {}", d.id, d.name);
    line("devices", fmt::format("{} ({}{})", sel.ids.empty() ? "none" : fmt::format("{}", fmt::join(sel.ids, ", ")),
                                sel.reason, names.empty() ? "" : "; " + names));
    if (!sel.vendor.empty()) line("vendor", sel.vendor);
  } catch (const std::exception& e) {
    line("devices", std::string("detection failed: ") + e.what() + " (a run would stop here)");
  }
  line("workers", cfg.num_workers_auto ? fmt::format("auto (from measured LLM and device time, at least {})",
                                                     cfg.num_workers)
                                       : fmt::format("{} (fixed)", cfg.num_workers));
  line("model", fmt::format("{}", fmt::join(models, ", ")) +
                    (cfg.llm.provider.empty() ? "" : " (provider " + cfg.llm.provider + ")"));
  line("kernel dir", o.kernel_dir.empty() ? "(none given; a run needs --kernel-dir)" : o.kernel_dir);
  line("rounds", fmt::format("at most {}", b.rounds));
  line("candidates", fmt::format("round 1: {}, each later round: up to {}; at most {} in all", b.candidates_round1,
                                 b.candidates_later, b.candidates));
  if (cfg.tune_variants > 0)
    line("variants", fmt::format("up to {} launch-constant variants per kernel while the LLM thinks (tune_variants; no "
                                 "LLM call, device time only)", cfg.tune_variants));
  line("LLM calls",
       fmt::format("at most {} = {} candidates x (1 optimize + {} refinements + 1 reflexion) + {} bottleneck "
                   "analyses; {} when every first draft verifies",
                   b.calls_max, b.candidates, cfg.max_refine_attempts, b.analyses, b.calls_min));

  // Tokens: ~4 characters a token (the client's own estimate); prompts hold the kernel and the
  // problem plus the template and history, a refinement also the test; replies are bounded by the
  // max_tokens of each purpose.
  const double input = static_cast<double>(file_chars(o.kernel_dir, "input.py", 4096));
  const double problem = static_cast<double>(file_chars(o.kernel_dir, "problem.py", 2048));
  const double test = static_cast<double>(file_chars(o.kernel_dir, "test.py", 4096));
  const double prompt_low = (input + problem + 2500) / 4, prompt_high = (input + problem + test + 16000) / 4;
  const double reply_low = input / 4 + 200;
  const double first = static_cast<double>(b.candidates);  // optimize + reflexion each
  const double refines = static_cast<double>(b.candidates) * cfg.max_refine_attempts;
  const double analyses = static_cast<double>(b.analyses);
  const double in_low = (2 * first + analyses) * prompt_low;
  const double in_high = (2 * first + refines + analyses) * prompt_high;
  const double out_low = (2 * first + analyses) * reply_low;
  const double out_high = first * (cfg.llm.max_tokens + 2048) + refines * 20000 + analyses * 16384;
  line("tokens", fmt::format("est. {} to {} in, {} to {} out", thousands(in_low), thousands(in_high),
                             thousands(out_low), thousands(out_high)));
  std::optional<double> cost_low, cost_high;
  std::vector<std::string> unpriced;
  for (const auto& m : models) {
    auto p = price_for(m, cfg.llm.prices);
    if (!p) {
      unpriced.push_back(m);
      continue;
    }
    const double lo = (in_low * p->in_per_mtok + out_low * p->out_per_mtok) / 1e6;
    const double hi = (in_high * p->in_per_mtok + out_high * p->out_per_mtok) / 1e6;
    cost_low = cost_low ? std::min(*cost_low, lo) : lo;
    cost_high = cost_high ? std::max(*cost_high, hi) : hi;
  }
  std::string cost = cost_low ? fmt::format("est. ${:.2f} to ${:.2f}", *cost_low, *cost_high) : "unknown";
  if (!unpriced.empty()) cost += fmt::format(" (no price for {}: set llm.prices)", fmt::join(unpriced, ", "));
  if (cfg.llm.provider == "replay") cost += " (provider replay: replies come from recordings, nothing is spent)";
  if (cfg.llm.budget_usd > 0) cost += fmt::format("; llm.budget_usd {:.2f} stops the run there", cfg.llm.budget_usd);
  line("cost", cost);
  line("run directory", o.resume.empty() ? "a new one under " + o.run_dir + "/ (not created now)" : o.resume +
                                                                                                        " (resumed)");
}

} // namespace

llm_call_bound bound_llm_calls(const run_config& cfg) {
  llm_call_bound b;
  const auto& sc = cfg.strategy_cfg;
  b.rounds = std::max(1, cfg.max_rounds);
  if (cfg.strategy == "greedy") {
    b.candidates_round1 = 1;
    b.candidates_later = 1;
  } else {
    const long fan = static_cast<long>(sc.num_bottlenecks) * static_cast<long>(models_of(cfg).size()) *
                     sc.samples_per_prompt;
    b.candidates_round1 = fan;  // the beam starts with the starting kernel alone
    b.candidates_later = beam_parents(sc) * fan;
  }
  b.candidates = b.candidates_round1 + (b.rounds - 1) * b.candidates_later;
  b.per_candidate = 1 + cfg.max_refine_attempts + 1;
  // One analysis per distinct parent (cached): the starting kernel, then at most the parents of
  // each later round.
  const long parents_later = cfg.strategy == "greedy" ? 1 : beam_parents(sc);
  b.analyses = 1 + (b.rounds - 1) * parents_later;
  b.calls_max = b.candidates * b.per_candidate + b.analyses;
  b.calls_min = b.candidates * 2 + b.analyses;
  return b;
}

int plan_main(const run_options& o, const std::function<void(run_config&)>& apply) {
  check_environment(current_environment());
  if (o.dry_run) {
    if (!o.kernel_dir.empty()) check_kernel_files(o.kernel_dir, static_cast<size_t>(limits::max_kernel_bytes));
    if (o.resume.empty()) check_run_dir_base(o.run_dir);
  }
  const auto configs = resolve_configs(o, apply);
  if (o.dry_run && !o.kernel_dir.empty())
    for (const auto& c : configs) check_kernel_files(o.kernel_dir, static_cast<size_t>(c.cfg.max_kernel_bytes));
  if (o.print_config) {
    for (size_t i = 0; i < configs.size(); ++i) {
      if (i) std::cout << "---\n";
      const auto& c = configs[i];
      std::cout << "# strategy " << c.name << (c.cfg.source_path.empty() ? "" : " from " + c.cfg.source_path)
                << ", with the command line's overrides\n";
      std::string yaml = to_yaml(c.cfg);
      std::cout << yaml << (yaml.empty() || yaml.back() != '\n' ? "\n" : "");
    }
  }
  if (o.dry_run) {
    if (o.print_config) std::cout << "\n";
    std::cout << "dry run: nothing is created and no LLM is contacted\n";
    for (size_t i = 0; i < configs.size(); ++i) {
      std::cout << "\n";
      print_plan(configs[i], o);
    }
  }
  return 0;
}

} // namespace kagent::app
