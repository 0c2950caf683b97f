#include "platform/rocm/rocprof_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

#include <unistd.h>

#include "platform/common/errors.hpp"

namespace fs = std::filesystem;

namespace kagent {

namespace {

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += sep;
    out += v[i];
  }
  return out;
}

std::string in_dir(const std::string& dir, const std::string& name) { return (fs::path(dir) / name).string(); }

// Output files of one prefix. rocprofv3 writes `<dir>/<prefix>_<domain>.csv`; a `-i` text input
// puts each pass under `<dir>/pmc_<n>/` (one pmc line -> pmc_1), so both places are listed.
std::vector<std::string> outputs_of(const std::string& dir, const std::string& prefix,
                                    const std::vector<std::string>& domains, bool pmc_subdir) {
  std::vector<std::string> out;
  for (const auto& d : domains) {
    if (pmc_subdir) out.push_back(in_dir(dir, "pmc_1/" + prefix + "_" + d + ".csv"));
    out.push_back(in_dir(dir, prefix + "_" + d + ".csv"));
  }
  return out;
}

std::vector<std::string> program_tail(const rocprof_target& t) { return {"--", t.python, t.wrapper}; }

} // namespace

std::vector<counter_group> rocprof_counter_groups(bool with_mfma) {
  std::vector<counter_group> g{
      {{{"SQ_WAVES", "SQ_INSTS_VALU", "SQ_INSTS_SALU", "SQ_INSTS_VMEM_RD", "SQ_INSTS_VMEM_WR", "SQ_INSTS_LDS",
         "SQ_WAIT_INST_ANY"}},
       true},
      {{{"TCC_HIT_sum", "TCC_MISS_sum"}}, true},
      // gfx942/gfx950 name the EA counters TCC_EA0_*; gfx90a only knows TCC_EA_* (SPEC §14 A.5).
      {{{"TCC_EA0_RDREQ_sum"}, {"TCC_EA_RDREQ_sum"}}, true},
      {{{"TCC_EA0_WRREQ_sum"}, {"TCC_EA_WRREQ_sum"}}, true},
      // FETCH_SIZE and WRITE_SIZE share a hardware block: together they give error 38 and a hang
      // on gfx942 (SPEC §14 A.4), so each has its own pass.
      {{{"FETCH_SIZE"}}, true},
      {{{"WRITE_SIZE"}}, true},
  };
  if (with_mfma)
    // Matrix-core work is invisible to SQ_INSTS_VALU-based FLOP estimates. The SQ block is full after
    // group 0, so these need their own pass; it is optional because not every ISA has them.
    g.push_back({{{"SQ_INSTS_VALU_MFMA_MOPS_F16", "SQ_INSTS_VALU_MFMA_MOPS_BF16", "SQ_INSTS_VALU_MFMA_MOPS_F32"}},
                 false});
  return g;
}

std::vector<const rocprof_invocation*> rocprof_plan::all_invocations() const {
  std::vector<const rocprof_invocation*> out{&stats};
  for (const auto& p : passes)
    for (const auto& a : p.alternatives) out.push_back(&a);
  return out;
}

rocprof_plan plan_rocprof(const rocprof_target& t, const rocprof_plan_options& opts) {
  auto need = [](const std::string& v, const char* what) {
    if (v.empty()) throw user_error(std::string("rocprof plan: ") + what + " is empty");
  };
  need(t.python, "python interpreter");
  need(t.wrapper, "wrapper script");
  need(t.output_dir, "output directory");
  need(t.kernel_id, "kernel id");
  need(t.binary, "rocprofv3 binary");
  const std::string id = sanitize_kernel_id(t.kernel_id);

  rocprof_plan plan;
  plan.binary = t.binary;
  plan.cwd = t.output_dir;
  plan.env_overrides["TRITON_CACHE_DIR"] = in_dir(t.output_dir, ".triton_cache");

  auto& s = plan.stats;
  s.kind = "stats";
  s.prefix = id + "_stats";
  // Long-form --output-format: ROCm 7.0's rocprofv3 rejects -f, and ROCm 7 defaults to SQLite.
  s.argv = {t.binary, "--kernel-trace", "--stats", "--output-format", "csv", "-d", t.output_dir, "-o", s.prefix};
  for (auto& a : program_tail(t)) s.argv.push_back(a);
  s.expected_outputs =
      outputs_of(t.output_dir, s.prefix, {"kernel_stats", "kernel_trace", "agent_info", "domain_stats"}, false);
  s.stats_csv_candidates = {in_dir(t.output_dir, s.prefix + "_kernel_stats.csv")};
  s.trace_csv_candidates = {in_dir(t.output_dir, s.prefix + "_kernel_trace.csv")};
  s.log_line = "[rocprof] Running stats pass";

  auto groups = rocprof_counter_groups(opts.with_mfma);
  for (size_t i = 0; i < groups.size(); ++i) {
    rocprof_pass pass;
    pass.index = static_cast<int>(i);
    pass.required = groups[i].required;
    const auto& alts = groups[i].alternatives;
    for (size_t j = 0; j < alts.size(); ++j) {
      rocprof_invocation inv;
      inv.kind = "pmc";
      inv.pass = static_cast<int>(i);
      inv.alternative = static_cast<int>(j);
      inv.last_alternative = j + 1 == alts.size();
      inv.required = groups[i].required;
      inv.counters = alts[j];
      inv.prefix = fmt::format("{}_pass{}_{}", id, i, j);
      inv.input_file = in_dir(t.output_dir, fmt::format("{}_input_pass{}_{}.txt", id, i, j));
      inv.input_contents = "pmc: " + join(inv.counters, " ") + "\n";
      inv.argv = {t.binary, "-i", inv.input_file, "--output-format", "csv", "-d", t.output_dir, "-o", inv.prefix};
      for (auto& a : program_tail(t)) inv.argv.push_back(a);
      inv.expected_outputs = outputs_of(t.output_dir, inv.prefix, {"counter_collection", "agent_info"}, true);
      inv.counter_csv_candidates = outputs_of(t.output_dir, inv.prefix, {"counter_collection"}, true);
      inv.log_line = fmt::format("[rocprof] Running PMC pass {}: {}", i + 1, join(inv.counters, " "));
      pass.alternatives.push_back(std::move(inv));
    }
    plan.passes.push_back(std::move(pass));
  }
  apply_profile_budget(plan, opts.total_budget_s, opts.per_command_cap_s);
  return plan;
}

double apply_profile_budget(rocprof_plan& plan, double total_budget_s, double per_command_cap_s) {
  size_t n = plan.all_invocations().size();
  // Each kill costs the runner's SIGTERM grace; keep a second per command for it.
  constexpr double reserve_per_command_s = 1.0;
  double share = (total_budget_s - reserve_per_command_s * static_cast<double>(n)) / static_cast<double>(n);
  share = std::clamp(share, 1.0, per_command_cap_s > 0 ? per_command_cap_s : share);
  plan.budget_s = total_budget_s;
  plan.stats.timeout_s = share;
  for (auto& p : plan.passes)
    for (auto& a : p.alternatives) a.timeout_s = share;
  return share;
}

std::string find_rocprof_binary(const platform_kwargs& kw, const env_map& env, const std::string& python,
                                const std::vector<std::string>& fallback_dirs) {
  auto is_exec = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  for (const auto* configured : {&kw.rocprof_bin_path, &kw.ncu_bin_path}) {
    if (configured->empty()) continue;
    const char* key = configured == &kw.rocprof_bin_path ? "rocprof_bin_path" : "ncu_bin_path";
    auto base = fs::path(*configured).filename().string();
    if (base == "rocprof" || base == "rocprofv2")
      throw user_error(fmt::format("platform_kwargs.{}: '{}' is rocprof v1/v2; only rocprofv3 is supported "
                                   "(ROCm >= 10.1)",
                                   key, *configured));
    if (!is_exec(*configured))
      throw user_error(fmt::format("platform_kwargs.{}: '{}' is not an executable file (expected the path of "
                                   "rocprofv3)",
                                   key, *configured));
    return *configured;
  }
  const std::string name = "rocprofv3";
  std::vector<std::string> tried;
  auto path_var = env_get(env, "PATH").value_or("");
  if (auto p = find_on_path(name, path_var); !p.empty()) return p;
  tried.push_back("$PATH");
  if (!python.empty()) {
    // The interpreter as written: a bare name is looked up on PATH first; a venv's python is often a
    // symlink whose target directory has no rocprofv3, so its own directory comes first.
    fs::path py = python.find('/') == std::string::npos ? fs::path(find_on_path(python, path_var)) : fs::path(python);
    if (!py.empty()) {
      fs::path beside = fs::absolute(py).parent_path() / name;
      if (is_exec(beside)) return beside.string();
      tried.push_back(beside.parent_path().string());
      std::error_code ec;
      fs::path resolved = fs::canonical(py, ec);
      if (!ec) {
        fs::path beside_resolved = resolved.parent_path() / name;
        if (is_exec(beside_resolved)) return beside_resolved.string();
        tried.push_back(beside_resolved.parent_path().string());
      }
    }
  }
  for (const auto& d : fallback_dirs) {
    fs::path cand = fs::path(d) / name;
    if (is_exec(cand)) return cand.string();
    tried.push_back(d);
  }
  throw run_error("rocprofv3 not found (looked in " + join(tried, ", ") +
                  "); install ROCm >= 10.1 or set platform_kwargs.rocprof_bin_path");
}

std::vector<std::string> remove_expected_outputs(const rocprof_invocation& inv) {
  std::vector<std::string> removed;
  for (const auto& p : inv.expected_outputs) {
    std::error_code ec;
    if (fs::remove(p, ec)) removed.push_back(p);
  }
  return removed;
}

std::optional<std::string> first_existing(const std::vector<std::string>& candidates) {
  for (const auto& c : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(c, ec)) return c;
  }
  return std::nullopt;
}

namespace {
std::string how_it_ended(const tool_exit& ex) {
  if (ex.term_signal != 0) return fmt::format("rc=-{}, killed by signal {}", ex.term_signal, ex.term_signal);
  return fmt::format("rc={}", ex.exit_code);
}
} // namespace

pmc_outcome judge_pmc_attempt(const rocprof_invocation& inv, const tool_exit& ex, bool csv_exists,
                              bool csv_has_rows) {
  const int n = inv.pass + 1;
  if (ex.timed_out)
    return {pmc_outcome::action::fail_pass,
            fmt::format("rocprof PMC pass {} timed out after {:g} s", n, ex.timeout_s)};
  std::string why;
  if (ex.term_signal != 0 || ex.exit_code != 0)
    why = fmt::format("rocprof PMC pass {} failed ({})", n, how_it_ended(ex));
  else if (!csv_exists)
    why = fmt::format("rocprof PMC pass {} failed (rc=0): rocprof completed without a usable CSV", n);
  else if (!csv_has_rows)
    why = fmt::format("rocprof PMC pass {} failed (rc=0): rocprof PMC CSV has no counter rows", n);
  if (why.empty()) return {pmc_outcome::action::accept, ""};
  if (!inv.last_alternative) return {pmc_outcome::action::try_next, why};
  return {pmc_outcome::action::fail_pass, why};
}

std::optional<std::string> judge_stats_attempt(const tool_exit& ex, bool stats_csv_exists, bool trace_csv_exists) {
  if (ex.timed_out) return fmt::format("rocprof stats pass timed out after {:g} s", ex.timeout_s);
  if (ex.term_signal != 0 || ex.exit_code != 0)
    return fmt::format("rocprof stats pass failed ({})", how_it_ended(ex));
  if (!stats_csv_exists || !trace_csv_exists) return std::string("rocprof completed without a usable CSV");
  return std::nullopt;
}

} // namespace kagent
