#include "app/run_command.hpp"

#include "app/plan_command.hpp"
#include "app/startup_checks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <iostream>
#include <sstream>

#include "actors/runtime.hpp"
#include "platform/common/errors.hpp"
#include "platform/common/node_auth.hpp"
#include "platform/config/config.hpp"
#include "platform/gpu/selection.hpp"

namespace kagent::app {

void add_run_options(CLI::App& app, run_options& o) {
  app.add_option("--kernel-dir", o.kernel_dir, "kernel directory: input.py, problem.py, test.py");
  app.add_option("--strategy", o.strategy, "strategy config name (configs/<name>.yaml, $KAGENT_CONFIG_DIR), a .yaml path, or 'all'")
      ->capture_default_str();
  // Range-checked where the config is applied (one "kagent-actors: error:" line, like every bad value;
  // CLI's PositiveNumber printed a 300-digit bound).
  app.add_option("--max-rounds", o.max_rounds, "override the config's max_rounds (1 to "
                 + std::to_string(limits::max_rounds) + ")");
  app.add_option("--run-dir", o.run_dir, "where run directories are created")->capture_default_str();
  app.add_option("--resume", o.resume, "continue the run in RUN_DIR");
  app.add_option("--model", o.model, "LLM model (overrides openai_model and llm.model)");
  app.add_option("--provider", o.provider,
                 "LLM provider: anthropic, openai, openai_responses, openai_compatible, relay or replay "
                 "(overrides llm.provider; default: chosen from the model and the keys you have)");
  app.add_option("--base-url", o.base_url, "LLM endpoint base URL (e.g. http://localhost:8000/v1 for vLLM)");
  app.add_option("--budget-usd", o.budget_usd, "stop spending on LLM calls past this many US dollars (llm.budget_usd)");
  app.add_option("--gpu-ids", o.gpu_ids, "comma-separated device ids (skips detection), e.g. 0,1");
  app.add_option("--node", o.nodes, "HOST:PORT of a `kagent-actors serve` node whose devices join the run "
                 "(repeatable; adds to the config's nodes:; the secret is KAGENT_NODE_SECRET)");
  app.add_flag("--no-local-devices", o.no_local_devices, "run candidates only on the nodes' devices");
  app.add_option("--llm-record", o.llm_record, "record every LLM request/response (keys redacted) in DIR");
  app.add_flag("--list-strategies", o.list_strategies, "list the strategies and exit");
  app.add_flag("-v,--verbose", o.verbose, "print every event");
  app.add_flag("-q,--quiet", o.quiet, "print only errors, the end of the run and the summary");
  app.add_flag("--print-config", o.print_config, "print the resolved config (after --model, --max-rounds, ...) and exit");
  app.add_flag("--dry-run", o.dry_run, "print the plan (devices, candidates, most LLM calls, est. cost) and exit");
}

namespace {

void apply_overrides(run_config& cfg, const run_options& o) {
  if (o.max_rounds != run_options::unset && (o.max_rounds < 1 || o.max_rounds > limits::max_rounds))
    throw user_error(fmt::format("--max-rounds {}: expected 1 to {}", o.max_rounds, limits::max_rounds));
  if (o.max_rounds != run_options::unset) cfg.max_rounds = o.max_rounds;
  if (!o.model.empty() && o.provider.empty() && cfg.llm.provider == "replay")
    throw user_error(fmt::format(
        "--model {}: strategy '{}' replays recorded replies (llm.provider: replay), so no model would be asked; "
        "to use a real model add --provider (anthropic, openai, openai_compatible with --base-url, ...), e.g. "
        "--provider {} --model {}",
        o.model, cfg.name,
        o.model.rfind("claude", 0) == 0 ? "anthropic"
        : o.model.rfind("gpt", 0) == 0 || (o.model.size() > 1 && o.model[0] == 'o' && std::isdigit(static_cast<unsigned char>(o.model[1])))
            ? "openai"
            : "openai_compatible --base-url URL",
        o.model));
  if (!o.model.empty()) {
    cfg.openai_model = o.model;
    cfg.llm.model = o.model;
  }
  if (!o.provider.empty()) cfg.llm.provider = o.provider;
  if (!o.base_url.empty()) cfg.llm.base_url = o.base_url;
  if (o.budget_usd) {
    if (!(*o.budget_usd >= 0 && *o.budget_usd <= limits::max_usd))
      throw user_error(fmt::format("--budget-usd {}: expected 0 to {} (0: no budget)", *o.budget_usd, limits::max_usd));
    cfg.llm.budget_usd = *o.budget_usd;
  }
  if (!o.gpu_ids.empty()) cfg.gpu_ids = parse_gpu_ids(o.gpu_ids);
  for (const auto& n : o.nodes) {
    (void)parse_node_address(n, "--node");
    if (std::find(cfg.nodes.begin(), cfg.nodes.end(), n) == cfg.nodes.end()) cfg.nodes.push_back(n);
  }
  for (const auto& n : cfg.nodes) (void)parse_node_address(n, "nodes:");
  if (o.no_local_devices) cfg.local_devices = false;
  if (!cfg.local_devices && cfg.nodes.empty())
    throw user_error("local_devices is false but no node is named: give --node HOST:PORT or nodes: in the config");
}

/// Why `cfg` cannot run on this host ("" when it can): a vendor config never runs on the other
/// vendor's host (SPEC §14 A.71).
std::string unfit_reason(const run_config& cfg) {
  if (platform_needs_no_gpu(cfg.platform)) return "";
  try {
    const auto env = current_environment();
    auto sel = detect_gpus({cfg.platform, cfg.gpu_ids}, env, tool_locations::from_env(env, cfg.python));
    const auto want = requested_vendor(cfg.platform);
    if (!want.empty() && sel.vendor != want) return "this host's GPUs are " + sel.vendor;
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

int list_strategies() {
  auto all = discover_strategies(config_search_dirs());
  std::cout << fmt::format("{:<14} {:<12} {:<10} {:<8} {}\n", "strategy", "search", "platform", "fits", "file");
  for (const auto& [name, path] : all) {
    try {
      auto c = load_config_file(path);
      auto why = unfit_reason(c);
      std::cout << fmt::format("{:<14} {:<12} {:<10} {:<8} {}\n", name, c.strategy, c.platform.uniform(),
                               why.empty() ? "yes" : "no", path);
    } catch (const std::exception& e) {
      std::cout << fmt::format("{:<14} {:<12} {:<10} {:<8} {} ({})\n", name, "?", "?", "error", path, e.what());
    }
  }
  return 0;
}

} // namespace

/// The last lines of a run that did not succeed: an interrupted one says what was kept and how to go
/// on; a failed one its error.
static void report_interrupt_or_failure(const run_outcome& out) {
  if (out.exit_code == 130) {
    const auto& s = out.summary;
    std::string best = "no candidate was verified yet";
    if (s.contains("best_ms") && s["best_ms"].is_number())
      best = fmt::format("best so far {} at {:.4f} ms", s.value("best_program_id", "?"), s["best_ms"].get<double>());
    std::cerr << "kagent-actors: interrupted (" << s.value("interrupted_by", "signal") << "); " << best
              << "; summary.json and report.html written in " << out.run_path << "\n"
              << "kagent-actors: resume with: " << s.value("resume_command", "kagent-actors --resume " + out.run_path)
              << "\n";
    return;
  }
  if (out.exit_code != 0) std::cerr << "kagent-actors: run failed: " << out.error << "\n";
}

/// One strategy, to the end: the run's verdict as the exit code, its error on stderr.
static int run_one(run_config cfg, std::string kernel_dir, const run_options& o) {
  run_request req;
  req.cfg = std::move(cfg);
  apply_overrides(req.cfg, o);
  check_kernel_files(kernel_dir, static_cast<size_t>(req.cfg.max_kernel_bytes));
  req.kernel_dir = std::move(kernel_dir);
  req.run_dir_base = o.run_dir;
  req.resume_dir = o.resume;
  req.extend_to_rounds = !o.resume.empty() && o.max_rounds != run_options::unset ? o.max_rounds : 0;
  req.llm_record_dir = o.llm_record;
  req.verbose = o.verbose;
  req.quiet = o.quiet;
  auto out = run_optimization(req);
  report_interrupt_or_failure(out);
  return out.exit_code;
}

int run_main(const run_options& o) {
  if (o.list_strategies) return list_strategies();
  if (o.print_config || o.dry_run) return plan_main(o, [&o](run_config& c) { apply_overrides(c, o); });
  // Everything the command line and the environment say is checked before a config is loaded or a
  // directory touched: one line, exit 2.
  check_environment(current_environment());
  if (!o.resume.empty()) check_resume_dir(o.resume);
  else check_run_dir_base(o.run_dir);
  if (!o.resume.empty() && o.strategy != "all") {
    // The run's own config and kernel directory; flags given now (e.g. --max-rounds) still apply.
    auto target = read_resume_target(o.resume, o.max_rounds != run_options::unset ? o.max_rounds : 0);
    auto cfg = load_config_file(target.config_path);
    if (!target.strategy_name.empty()) cfg.name = target.strategy_name;
    return run_one(std::move(cfg), o.kernel_dir.empty() ? target.kernel_dir : o.kernel_dir, o);
  }
  check_kernel_files(o.kernel_dir, static_cast<size_t>(limits::max_kernel_bytes));
  const auto dirs = config_search_dirs();
  if (o.strategy != "all") return run_one(load_strategy(o.strategy, dirs), o.kernel_dir, o);

  if (!o.resume.empty()) throw user_error("--resume cannot be combined with --strategy all");
  struct row {
    std::string name, status, best, run;
  };
  std::vector<row> rows;
  int failures = 0;
  for (const auto& [name, path] : discover_strategies(dirs)) {
    run_request req;
    req.cfg = load_config_file(path);
    apply_overrides(req.cfg, o);
    check_kernel_files(o.kernel_dir, static_cast<size_t>(req.cfg.max_kernel_bytes));
    if (auto why = unfit_reason(req.cfg); !why.empty()) {
      rows.push_back({name, "skipped", "", why});
      continue;
    }
    req.kernel_dir = o.kernel_dir;
    req.run_dir_base = o.run_dir;
    req.llm_record_dir = o.llm_record;
    req.verbose = o.verbose;
    req.quiet = o.quiet;
    std::cerr << "== strategy " << name << "\n";
    try {
      auto out = run_optimization(req);
      if (out.exit_code == 130) {
        // Ctrl-C ends the whole comparison, not only this strategy.
        report_interrupt_or_failure(out);
        return 130;
      }
      const auto& s = out.summary;
      const bool ok = out.exit_code == 0;
      if (!ok) ++failures;
      rows.push_back({name, ok ? "+" : "-",
                      ok && s.contains("best_ms") && s["best_ms"].is_number() ? fmt::format("{:.4f} ms", s["best_ms"].get<double>()) : "N/A",
                      out.run_path});
    } catch (const std::exception& e) {
      ++failures;
      rows.push_back({name, "-", "N/A", e.what()});
    }
  }
  std::cout << "\n== comparison\n";
  for (const auto& r : rows) std::cout << fmt::format("  {:<8} {:<14} {:>14}  {}\n", r.status, r.name, r.best, r.run);
  return failures == 0 ? 0 : 1;
}

} // namespace kagent::app
