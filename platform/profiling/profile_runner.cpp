#include "platform/profiling/profile_runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <sstream>
#include <fstream>
#include <regex>
#include <system_error>

#include "platform/common/errors.hpp"
#include "platform/common/redact.hpp"
#include "platform/common/stop.hpp"
#include "platform/gpu/specs.hpp"
#include "platform/nvidia/ncu_parse.hpp"
#include "platform/nvidia/ncu_plan.hpp"
#include "platform/profiling/profile_cache.hpp"
#include "platform/profiling/roofline_factory.hpp"
#include "platform/process/background.hpp"
#include "platform/process/proc_tree.hpp"
#include "platform/process/runner.hpp"
#include "platform/profile_core/profile_common.hpp"
#include "platform/rocm/rocprof_parse.hpp"
#include "platform/rocm/rocprof_plan.hpp"
#include "platform/common/files.hpp"

namespace fs = std::filesystem;

namespace kagent {

void to_json(nlohmann::json& j, const invocation_record& r) {
  j = nlohmann::json{{"name", r.name},
                     {"argv", r.argv},
                     {"started", r.started},
                     {"exit_code", r.exit_code},
                     {"term_signal", r.term_signal},
                     {"timed_out", r.timed_out},
                     {"timeout_s", r.timeout_s},
                     {"start_s", r.start_s},
                     {"wall_s", r.wall_s},
                     {"produced_files", r.produced_files},
                     {"verdict", r.verdict},
                     {"output_tail", r.output_tail}};
}

std::optional<double> next_command_timeout(double share_s, double budget_s, double elapsed_s, double kill_grace_s,
                                           double min_command_s) {
  const double left = budget_s - elapsed_s - kill_grace_s;
  if (left < min_command_s) return std::nullopt;
  return std::min(share_s, left);
}

double fair_command_timeout(double left_s, int commands_after, double slowest_s, double cap_s) {
  if (left_s <= 0) return 0;
  const int k = std::max(0, commands_after);
  const double even = left_s / static_cast<double>(k + 1);
  const double reserve = slowest_s > 0 ? 2.0 * slowest_s + 1.0 : even / 2.0;
  double t = std::max(even, left_s - static_cast<double>(k) * reserve);
  if (cap_s > 0) t = std::min(t, cap_s);
  return t;
}

std::optional<std::string> derive_kernel_name(const std::string& code) {
  // A decorator line "@triton.jit", "@triton.jit(...)" or "@jit", then (possibly after further
  // decorators) the def it decorates.
  static const std::regex jit_re(R"((^|\n)[ \t]*@[ \t]*(triton[ \t]*\.[ \t]*)?jit\b)");
  static const std::regex def_re(R"(\bdef[ \t]+([A-Za-z_][A-Za-z0-9_]*)[ \t]*\()");
  std::vector<std::string> names;
  for (auto it = std::sregex_iterator(code.begin(), code.end(), jit_re); it != std::sregex_iterator(); ++it) {
    std::smatch def;
    auto from = code.begin() + (it->position(0) + it->length(0));
    if (std::regex_search(from, code.end(), def, def_re)) {
      std::string name = def[1].str();
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  for (const auto& n : names) {
    const std::regex launch("\\b" + n + "[ \\t]*\\[");
    if (std::regex_search(code, launch)) return n;
  }
  if (names.size() == 1) return names.front();
  return std::nullopt;
}

namespace {

using clock_type = std::chrono::steady_clock;

constexpr double kill_grace_s = 0.5;
constexpr size_t tail_chars = 2000;

std::string json_literal(const std::string& s) { return nlohmann::json(s).dump(); }

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << redact(text);
  if (!f) throw run_error("cannot write " + p.string());
}

std::string output_tail_of(const process_result& r) {
  if (!r.started) return "could not start: " + r.error;
  std::string out;
  if (!r.out.empty()) out += "[stdout]\n" + tail_of(r.out, tail_chars);
  if (!r.err.empty()) {
    if (!out.empty() && out.back() != '\n') out += "\n";
    out += "[stderr]\n" + tail_of(r.err, tail_chars);
  }
  return out;
}

/// A command path as given, made absolute when it is relative (children run in the profile dir); a
/// bare name stays a name, looked up on the child's PATH.
std::string absolute_command(const std::string& cmd) {
  if (cmd.find('/') == std::string::npos || fs::path(cmd).is_absolute()) return cmd;
  return fs::absolute(cmd).lexically_normal().string();
}

/// A failure that ends the profile: what, which invocation, its output.
struct profile_failure {
  std::string error;
  std::string invocation;
  std::string output_tail;
};

class profile_session {
public:
  profile_session(const kernel_profile_request& req, kernel_profile_outcome& out)
      : req_(req), out_(out), t0_(clock_type::now()) {}

  double elapsed() const { return std::chrono::duration<double>(clock_type::now() - t0_).count(); }

  /// Sets up the directory, the kernel file and the launcher; returns the launcher's path. With
  /// `batch` ({id, code} of each kernel), the launcher runs the wrapper's batch mode on those kernels
  /// (each written to <id>_kernel.py here) instead of the request's one.
  std::string prepare(const std::string& id, const std::vector<std::pair<std::string, std::string>>& batch = {},
                      double standby_idle_s = 0) {
    dir_ = fs::absolute(req_.dir).lexically_normal();
    std::error_code ec;
    fs::create_directories(dir_ / "tmp", ec);
    if (ec) throw run_error("cannot create the profile directory " + dir_.string() + ": " + ec.message());
    jsonl_ = dir_ / "invocations.jsonl";
    write_text(jsonl_, "");  // this profile's records only

    // Children run in dir: every path they get is absolute.
    const fs::path wrapper =
        fs::absolute(fs::path(req_.install_root) / "harness" / "profile_wrapper.py").lexically_normal();
    if (req_.install_root.empty() || !fs::is_regular_file(wrapper, ec))
      throw user_error("profile wrapper not found: " + wrapper.string() + " (install_root is '" +
                       req_.install_root + "')");
    if (req_.problem_path.empty() || !fs::is_regular_file(req_.problem_path, ec))
      throw user_error("problem file not found: '" + req_.problem_path + "'");
    if (req_.python.empty()) throw user_error("no Python interpreter configured for the profile wrapper");
    if (req_.code.empty() && standby_idle_s <= 0) throw user_error("the profile request has no kernel code");

    // Planned once the directory exists (bwrap binds it); "bwrap" required but broken fails the setup.
    sandbox_request sb;
    sb.writable = {dir_.string()};
    sb.vendor = req_.device == "cpu" ? "" : req_.platform;
    sb.limits = req_.rlimits;
    sb.readable = {fs::absolute(req_.problem_path).parent_path().string(), fs::absolute(req_.install_root).string()};
    if (req_.python.find('/') != std::string::npos)
      sb.readable.push_back(fs::absolute(req_.python).parent_path().parent_path().string());
    sb.hidden = {fs::absolute(".env").string()};  // our own .env (API keys) stays unreadable
    std::string shared;
    if (!req_.shared_launchers.empty()) {
      shared = fs::absolute(req_.shared_launchers).lexically_normal().string();
      fs::create_directories(shared, ec);
      if (ec) shared.clear();
      else sb.readable.push_back(shared);
    }
    sandbox_ = plan_sandbox(req_.sandbox_mode.empty() ? "off" : req_.sandbox_mode, sb);
    // Read-only only under bwrap: elsewhere the kernel could write a module into it.
    if (sandbox_.mode != "bwrap") shared.clear();
    if (!sandbox_.warning.empty()) out_.notes.push_back(sandbox_.warning);
    const fs::path launcher = dir_ / (id + "_wrapper.py");
    std::string kernels;
    if (standby_idle_s > 0) {
      kernels = ", \"--standby\", " + json_literal(dir_.string()) + ", \"--idle-s\", " +
                json_literal(fmt::format("{:g}", standby_idle_s));
    } else if (batch.empty()) {
      const fs::path kernel = dir_ / (id + "_kernel.py");
      write_text(kernel, req_.code);
      kernels = ", \"--kernel\", " + json_literal(kernel.string());
    }
    for (const auto& [kid, code] : batch) {
      const fs::path kernel = dir_ / (kid + "_kernel.py");
      write_text(kernel, code);
      kernels += ", \"--batch\", " + json_literal(kid + "=" + kernel.string());
    }
    std::string args = json_literal(wrapper.string()) + ", \"--problem\", " +
                       json_literal(fs::absolute(req_.problem_path).lexically_normal().string()) + kernels +
                       ", \"--device\", " + json_literal(req_.device) + ", \"--dtype\", " + json_literal(req_.dtype);
    if (!req_.size.empty()) args += ", \"--size\", " + json_literal(req_.size);
    if (!shared.empty()) args += ", \"--launchers\", " + json_literal(shared);
    write_text(launcher, "# Generated by kagent-actors for profile " + id +
                             ": runs the harness's profile wrapper on this profile's kernel(s).\n"
                             "import runpy\nimport sys\n\nsys.argv = [" +
                             args + "]\nrunpy.run_path(sys.argv[0], run_name=\"__main__\")\n");
    return launcher.string();
  }

  const fs::path& dir() const { return dir_; }
  const invocation_record& last_record() const { return out_.records.back(); }
  /// The interpreter as configured, made absolute when it is a relative path (children run in dir);
  /// a bare name stays a name, looked up on the child's PATH.
  std::string python() const { return absolute_command(req_.python); }
  /// stdout then stderr of the last command (tails), unlabelled: what ncu's error checks read.
  const std::string& last_output() const { return last_output_; }

  env_map child_env(const std::map<std::string, std::string>& overrides) const {
    env_map env = req_.env;
    for (const auto& [k, v] : overrides) env[k] = v;
    env["TMPDIR"] = (dir_ / "tmp").string();
    env["PYTHONDONTWRITEBYTECODE"] = "1";  // no __pycache__ beside the problem, outside the run directory
    return env;
  }

  /// The timeout for the next command, or a failure when the budget is spent.
  double timeout_for(const std::string& tool, const std::string& name, double share) {
    auto t = next_command_timeout(share, out_.budget_s, elapsed(), kill_grace_s);
    if (!t)
      throw profile_failure{fmt::format("{} profile budget of {:g} s exhausted before {} ({:.1f} s used)", tool,
                                        out_.budget_s, name, elapsed()),
                            name, ""};
    return *t;
  }

  /// The process of one command in this profile's sandbox and directory.
  process_spec spec_for(const std::vector<std::string>& argv, const env_map& env, double timeout_s) const {
    process_spec spec;
    spec.argv = sandboxed_argv(sandbox_, argv);
    spec.env = env;
    spec.cwd = dir_.string();
    spec.timeout = std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
    spec.kill_grace = std::chrono::milliseconds(static_cast<long long>(kill_grace_s * 1000));
    spec.max_output_bytes = 64 * 1024;
    return spec;
  }

  /// Runs one command and records it. The caller deleted its expected outputs.
  invocation_record& run(const std::string& name, const std::vector<std::string>& argv, const env_map& env,
                         double timeout_s, const std::vector<std::string>& expected_outputs) {
    const double start = elapsed();
    // The timeout was decided a moment ago from what was left then; the command starts now, and must
    // not run past the budget less the kill grace from here (on a loaded machine the gap was > 1 ms).
    if (out_.budget_s > 0) timeout_s = std::max(0.05, std::min(timeout_s, out_.budget_s - kill_grace_s - start));
    auto r = run_process(spec_for(argv, env, timeout_s));
    return record(name, argv, timeout_s, start, r, expected_outputs);
  }

  /// Records a command that ran (from `start_s` of this profile until now).
  invocation_record& record(const std::string& name, const std::vector<std::string>& argv, double timeout_s,
                            double start_s, const process_result& r, const std::vector<std::string>& expected_outputs) {
    invocation_record rec;
    rec.name = name;
    rec.argv = argv;
    rec.timeout_s = timeout_s;
    rec.start_s = start_s;
    last_output_ = r.out + r.err;
    rec.started = r.started;
    rec.exit_code = r.exit_code;
    rec.term_signal = r.term_signal;
    rec.timed_out = r.timed_out;
    rec.wall_s = elapsed() - rec.start_s;
    rec.output_tail = output_tail_of(r);
    for (const auto& p : expected_outputs) {
      std::error_code ec;
      if (fs::is_regular_file(p, ec)) rec.produced_files.push_back(p);
    }
    out_.records.push_back(std::move(rec));
    return out_.records.back();
  }

  /// Sets the verdict of the last record and appends it to invocations.jsonl.
  void settle(const std::string& verdict) {
    auto& rec = out_.records.back();
    rec.verdict = verdict;
    std::ofstream f(jsonl_, std::ios::app | std::ios::binary);
    f << redact(nlohmann::json(rec).dump()) << "\n";
  }

private:
  const kernel_profile_request& req_;
  kernel_profile_outcome& out_;
  clock_type::time_point t0_;
  fs::path dir_;
  fs::path jsonl_;
  std::string last_output_;
  sandbox_plan sandbox_;
};

tool_exit exit_of(const invocation_record& r) { return {r.exit_code, r.term_signal, r.timed_out, r.timeout_s}; }

/// The stats row that names `wanted` (exactly, or followed by '(' or '.': a signature or ".kd").
std::optional<std::string> stats_name_for(const std::vector<kernel_stat>& stats, const std::string& wanted) {
  for (const auto& s : stats) {
    if (s.name == wanted) return s.name;
    if (s.name.size() > wanted.size() && s.name.compare(0, wanted.size(), wanted) == 0 &&
        (s.name[wanted.size()] == '(' || s.name[wanted.size()] == '.'))
      return s.name;
  }
  return std::nullopt;
}

bool has_counter_rows(const std::string& text, const std::string& kernel) {
  try {
    return !parse_counter_collection(text, kernel).values.empty();
  } catch (const std::exception&) {
    return false;
  }
}

std::string pmc_name(const rocprof_invocation& inv) {
  return inv.alternative == 0 ? fmt::format("PMC pass {}", inv.pass + 1)
                              : fmt::format("PMC pass {} (alt {})", inv.pass + 1, inv.alternative + 1);
}

nlohmann::json run_rocprof(profile_session& s, const kernel_profile_request& req, kernel_profile_outcome& out,
                           const std::string& id, const std::string& launcher) {
  std::string binary;
  try {
    binary = absolute_command(find_rocprof_binary(req.kwargs, req.env, s.python()));
  } catch (const std::exception& e) {
    throw profile_failure{e.what(), "setup", ""};
  }
  rocprof_plan plan = plan_rocprof({s.python(), launcher, s.dir().string(), id, binary},
                                   {.with_mfma = req.with_mfma,
                                    .total_budget_s = out.budget_s,
                                    .per_command_cap_s = req.per_command_cap_s});
  const env_map env = s.child_env(plan.env_overrides);

  // Stats pass: it must exit 0 and write both CSVs, and they must parse, before any PMC pass runs.
  const auto& st = plan.stats;
  const std::string stats_name = "stats pass";
  // Each command's timeout is decided when it starts, from what is left (fair_command_timeout).
  const double cap = req.per_command_cap_s > 0 ? req.per_command_cap_s : 0;
  double slowest = 0;
  auto fair = [&](int after) {
    return fair_command_timeout(out.budget_s - s.elapsed() - kill_grace_s, after, slowest, cap);
  };
  double timeout = s.timeout_for("rocprof", stats_name, fair(static_cast<int>(plan.passes.size())));
  remove_expected_outputs(st);
  auto& rec = s.run(stats_name, st.argv, env, timeout, st.expected_outputs);
  slowest = std::max(slowest, rec.wall_s);
  const std::string stats_tail = rec.output_tail;
  if (!rec.started) {
    s.settle("failed: could not start");
    throw profile_failure{"rocprof stats pass " + stats_tail, stats_name, stats_tail};
  }
  auto stats_csv = first_existing(st.stats_csv_candidates);
  auto trace_csv = first_existing(st.trace_csv_candidates);
  if (auto err = judge_stats_attempt(exit_of(rec), stats_csv.has_value(), trace_csv.has_value())) {
    s.settle("failed: " + *err);
    throw profile_failure{*err, stats_name, stats_tail};
  }
  std::vector<kernel_stat> stats;
  std::vector<kernel_dispatch> trace;
  std::string kernel;
  try {
    stats = parse_kernel_stats(read_file(*stats_csv));
    trace = parse_kernel_trace(read_file(*trace_csv));
    if (!req.kernel_name.empty()) {
      kernel = stats_name_for(stats, req.kernel_name).value_or(req.kernel_name);
    } else {
      auto derived = derive_kernel_name(req.code);
      std::optional<std::string> listed = derived ? stats_name_for(stats, *derived) : std::nullopt;
      if (derived && !listed)
        out.notes.push_back("the code's kernel '" + *derived +
                            "' is not in the stats; the busiest non-at:: kernel was profiled");
      kernel = listed ? *listed : choose_profiled_kernel(stats);
    }
    (void)last_dispatch_of(trace, kernel);
  } catch (const std::exception& e) {
    s.settle(std::string("failed: ") + e.what());
    throw profile_failure{e.what(), stats_name, stats_tail};
  }
  s.settle("accepted");

  std::vector<std::string> pmc_texts;
  for (size_t pi = 0; pi < plan.passes.size(); ++pi) {
    const auto& pass = plan.passes[pi];
    for (const auto& inv : pass.alternatives) {
      const std::string name = pmc_name(inv);
      double t = s.timeout_for("rocprof", name, fair(static_cast<int>(plan.passes.size() - pi - 1)));
      {
        std::ofstream f(inv.input_file, std::ios::binary | std::ios::trunc);
        f << inv.input_contents;
      }
      remove_expected_outputs(inv);
      auto& r = s.run(name, inv.argv, env, t, inv.expected_outputs);
      slowest = std::max(slowest, r.wall_s);
      if (!r.started) {
        s.settle("failed: could not start");
        throw profile_failure{"rocprof " + name + " " + r.output_tail, name, r.output_tail};
      }
      auto csv = first_existing(inv.counter_csv_candidates);
      std::string text = csv ? read_file(*csv) : "";
      auto o = judge_pmc_attempt(inv, exit_of(r), csv.has_value(), csv && has_counter_rows(text, kernel));
      if (o.act == pmc_outcome::action::accept) {
        s.settle("accepted");
        pmc_texts.push_back(std::move(text));
        break;
      }
      if (o.act == pmc_outcome::action::try_next) {
        s.settle("rejected: " + o.error + "; trying the next counter name");
        continue;
      }
      if (!pass.required) {
        s.settle("optional pass failed: " + o.error);
        std::string counters;
        for (const auto& c : inv.counters) counters += (counters.empty() ? "" : " ") + c;
        out.notes.push_back("optional " + name + " (" + counters + ") failed: " + o.error);
        break;
      }
      s.settle("failed: " + o.error);
      throw profile_failure{o.error, name, r.output_tail};
    }
  }

  rocprof_profile prof;
  try {
    prof = merge_rocprof(stats, trace, pmc_texts, kernel);
  } catch (const std::exception& e) {
    throw profile_failure{e.what(), "merge", ""};
  }
  out.kernel_name = prof.kernel_name;
  out.metrics = prof.metrics;
  nlohmann::json detail = prof;
  detail["rocprof_bin"] = binary;
  return detail;
}

nlohmann::json run_ncu(profile_session& s, const kernel_profile_request& req, kernel_profile_outcome& out,
                       const std::string& id, const std::string& launcher) {
  std::string binary;
  try {
    binary = absolute_command(find_ncu_binary(req.kwargs, req.env));
  } catch (const std::exception& e) {
    throw profile_failure{e.what(), "setup", ""};
  }
  std::string filter = req.kernel_name;
  if (filter.empty()) filter = derive_kernel_name(req.code).value_or("");
  const bool sudo = ncu_sudo_requested(req.env);
  // One command: the whole budget less the kill reserve, capped like every profiler command.
  double share = std::clamp(out.budget_s - 1.0, 1.0, req.per_command_cap_s > 0 ? req.per_command_cap_s : 1e9);
  ncu_invocation inv = plan_ncu({s.python(), launcher, s.dir().string(), id, binary, filter, sudo, ""}, share);
  const std::string name = "ncu";
  double t = s.timeout_for("ncu", name, inv.timeout_s);
  for (const auto& p : inv.expected_outputs) {
    std::error_code ec;
    fs::remove(p, ec);
  }
  auto& r = s.run(name, inv.argv, s.child_env(inv.env_overrides), t, inv.expected_outputs);
  const std::string tail = r.output_tail;
  auto fail = [&](const std::string& err) {
    s.settle("failed: " + err);
    return profile_failure{err, name, tail};
  };
  if (!r.started) throw fail("ncu " + tail);
  if (r.timed_out) throw fail(fmt::format("ncu timed out after {:g} s", r.timeout_s));
  if (r.term_signal != 0 || r.exit_code != 0) {
    // ncu prints its ==ERROR== lines on either stream; the permission check reads both.
    throw fail(ncu_failure_message(r.term_signal != 0 ? -r.term_signal : r.exit_code, s.last_output(), sudo));
  }
  ncu_selection sel;
  try {
    auto table = load_ncu_csv(inv.log_file, inv.kernel_filter);
    sel = select_ncu_kernel(table, filter.empty() ? std::nullopt : std::optional<std::string>(filter));
  } catch (const std::exception& e) {
    throw fail(e.what());
  }
  s.settle("accepted");
  out.kernel_name = sel.kernel_name;
  out.metrics = sel.metrics;
  nlohmann::json detail = sel;
  detail["ncu_bin"] = binary;
  detail["kernel_filter"] = filter;
  return detail;
}

std::optional<gpu_specs> specs_for(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (auto s = find_gpu_specs(name)) return s;
  if (auto key = resolve_gpu_name(name)) return find_gpu_specs(*key);
  return std::nullopt;
}

void add_roofline(const kernel_profile_request& req, kernel_profile_outcome& out) {
  auto specs = specs_for(req.gpu_name);
  if (req.platform == "rocm") {
    // ROCm's SOLs are fractions of the spec row's peaks: no row (or another vendor's), no verdict.
    if (!specs) {
      out.notes.push_back(req.gpu_name.empty() ? "no gpu_name: no roofline (the metrics are kept)"
                                               : "unknown gpu_name '" + req.gpu_name +
                                                     "': no roofline (the metrics are kept)");
      return;
    }
    if (specs->vendor != "amd") {
      out.notes.push_back("gpu_name '" + req.gpu_name + "' is not an AMD GPU: no ROCm roofline");
      return;
    }
  }
  // NVIDIA's SOLs are ncu's own percentages of the device's peaks: no spec row needed.
  try {
    auto analyzer = make_roofline_analyzer(req.platform, req.roofline, specs);
    out.roofline = analyzer->analyze(out.metrics);
  } catch (const std::exception& e) {
    out.notes.push_back(std::string("roofline failed: ") + e.what());
  }
}

void write_metrics_file(const fs::path& dir, const kernel_profile_request& req, const kernel_profile_outcome& out,
                        const nlohmann::json& detail) {
  nlohmann::json j{{"ok", out.ok},
                   {"platform", out.platform},
                   {"kernel_id", req.kernel_id},
                   {"kernel_name", out.kernel_name},
                   {"gpu_name", req.gpu_name},
                   {"error", out.error},
                   {"invocation", out.invocation},
                   {"metrics", out.metrics},
                   {"roofline", out.roofline ? nlohmann::json(*out.roofline) : nlohmann::json(nullptr)},
                   {"notes", out.notes},
                   {"budget_s", out.budget_s},
                   {"wall_s", out.wall_s},
                   {"invocations", out.records.size()},
                   {"detail", detail}};
  std::ofstream f(dir / "metrics.json", std::ios::binary | std::ios::trunc);
  f << redact(j.dump(2)) << "\n";
}

/// A profile from the cache, as a profile of its own would leave it: its kernel and metrics.json in
/// req.dir (invocations.jsonl empty: no tool ran), the roofline derived with this run's settings.
std::optional<kernel_profile_outcome> cached_outcome(const kernel_profile_request& req, const std::string& key) {
  auto o = load_cached_profile(req.cache_root, key);
  if (!o) return std::nullopt;
  o->budget_s = req.budget_s > 0 ? req.budget_s : default_profile_budget_s(1800);
  add_roofline(req, *o);
  try {
    const fs::path dir = fs::absolute(req.dir).lexically_normal();
    fs::create_directories(dir);
    const auto id = sanitize_kernel_id(req.kernel_id.empty() ? "profile" : req.kernel_id);
    write_text(dir / (id + "_kernel.py"), req.code);
    write_text(dir / "invocations.jsonl", "");
    write_metrics_file(dir, req, *o, o->detail);
  } catch (const std::exception&) {
  }
  return o;
}

kernel_profile_outcome profile_uncached(const kernel_profile_request& req);

} // namespace

// One request is a batch of one: the same cache lookup and store, then a profile of its own.
kernel_profile_outcome profile_kernel(const kernel_profile_request& req) { return profile_kernels({req}).front(); }

namespace {

kernel_profile_outcome profile_uncached(const kernel_profile_request& req) {
  kernel_profile_outcome out;
  out.platform = req.platform;
  out.budget_s = req.budget_s > 0 ? req.budget_s : default_profile_budget_s(1800);
  profile_session s(req, out);
  nlohmann::json detail;
  bool dir_ready = false;
  try {
    if (req.platform != "rocm" && req.platform != "nvidia")
      throw profile_failure{"profiler platform '" + req.platform + "' cannot profile (expected rocm or nvidia)",
                            "setup", ""};
    if (req.dir.empty()) throw profile_failure{"profile directory is empty", "setup", ""};
    const std::string id = sanitize_kernel_id(req.kernel_id.empty() ? "profile" : req.kernel_id);
    std::string launcher;
    try {
      launcher = s.prepare(id);
    } catch (const std::exception& e) {
      throw profile_failure{e.what(), "setup", ""};
    }
    dir_ready = true;
    detail = req.platform == "rocm" ? run_rocprof(s, req, out, id, launcher) : run_ncu(s, req, out, id, launcher);
    out.ok = true;
    out.detail = detail;
    add_roofline(req, out);
  } catch (const profile_failure& f) {
    out.ok = false;
    out.error = f.error;
    out.invocation = f.invocation;
    out.output_tail = f.output_tail;
  } catch (const std::exception& e) {
    // Our own fault (a file we could not write, say): still a failed profile, never an exception.
    out.ok = false;
    out.error = std::string("profiler: ") + e.what();
    out.invocation = out.records.empty() ? "setup" : out.records.back().name;
  }
  if (!out.ok) {
    out.metrics.clear();
    out.roofline.reset();
  }
  out.wall_s = s.elapsed();
  if (dir_ready) {
    try {
      write_metrics_file(s.dir(), req, out, detail);
    } catch (const std::exception&) {
      // The outcome is the result; the file is a convenience.
    }
  }
  return out;
}

// ---- a batch of kernels in one profiler process (NVIDIA) --------------------------------------------

double budget_of(const kernel_profile_request& r) {
  return r.budget_s > 0 ? r.budget_s : default_profile_budget_s(1800);
}

/// A request that can run in the same profiler process as `a`: NVIDIA, and everything but the kernel
/// the same (the problem, the interpreter, the device, the dtype and size, the sandbox, the tool).
bool same_profiler_process(const kernel_profile_request& a, const kernel_profile_request& r) {
  return r.platform == "nvidia" && a.platform == "nvidia" && !r.dir.empty() && !r.code.empty() &&
         r.problem_path == a.problem_path && r.python == a.python && r.install_root == a.install_root &&
         r.device == a.device && r.dtype == a.dtype && r.size == a.size && r.sandbox_mode == a.sandbox_mode &&
         r.env == a.env && r.kwargs.ncu_bin_path == a.kwargs.ncu_bin_path;
}

/// Kernels can share one profiler process when everything but the kernel is the same.
bool batchable(const std::vector<kernel_profile_request>& reqs) {
  if (reqs.size() < 2) return false;
  return std::all_of(reqs.begin(), reqs.end(),
                     [&](const kernel_profile_request& r) { return same_profiler_process(reqs.front(), r); });
}

} // namespace

/// Puts `rec` (with `verdict`) first in the invocations.jsonl of `dir` (created), before what a
/// profile of its own wrote there.
void prepend_invocation_record(const std::string& dir_s, invocation_record rec, const std::string& verdict) {
  const fs::path dir(dir_s);
  std::error_code ec;
  fs::create_directories(dir, ec);
  rec.verdict = verdict;
  const auto path = dir / "invocations.jsonl";
  write_text(path, redact(nlohmann::json(rec).dump()) + "\n" + read_file_if_present(path).value_or(""));
}

namespace {

/// What one profiler process of a batch left behind, as the kernels' outcomes are made from it.
struct batch_run {
  std::vector<std::optional<kernel_profile_outcome>> got;  ///< per request: attributed, or empty
  std::optional<invocation_record> record;                 ///< the process's invocation, once it ran
  std::string why_not;                                     ///< why a kernel was not delivered
  double wall_s = 0;
  double report_s = 0;                                     ///< of wall_s, after the device was given back
};

/// The Triton kernel each request launches ("" unknown).
std::vector<std::string> kernel_names_of(const std::vector<kernel_profile_request>& reqs) {
  std::vector<std::string> names;
  for (const auto& r : reqs) names.push_back(!r.kernel_name.empty() ? r.kernel_name : derive_kernel_name(r.code).value_or(""));
  return names;
}

double batch_budget(const std::vector<kernel_profile_request>& reqs) {
  double budget = 0;
  for (const auto& r : reqs) budget = std::max(budget, budget_of(r));
  return budget;
}

/// The batch's CSV, or (empty) the reason it gives none, in `b.why_not`.
std::optional<ncu_table> batch_table(profile_session& s, const invocation_record& r, const ncu_invocation& inv,
                                     bool sudo, batch_run& b) {
  try {
    return load_ncu_csv(inv.log_file, inv.kernel_filter);
  } catch (const std::exception& e) {
    b.why_not = r.timed_out ? fmt::format("ncu timed out after {:g} s", r.timeout_s)
                : (r.exit_code != 0 || r.term_signal != 0)
                    ? ncu_failure_message(r.term_signal != 0 ? -r.term_signal : r.exit_code, s.last_output(), sudo)
                    : std::string(e.what());
    return std::nullopt;
  }
}

/// Each kernel's outcome from its part of the batch's table (the same selection rules as a profile
/// of its own); returns how many were attributed.
size_t attribute_batch(const std::vector<kernel_profile_request>& reqs, const std::vector<std::string>& names,
                       const std::vector<ncu_table>& parts, const nlohmann::json& common, batch_run& b) {
  size_t attributed = 0;
  for (size_t i = 0; i < reqs.size() && i < parts.size(); ++i) {
    if (parts[i].rows.empty()) continue;
    kernel_profile_outcome o;
    o.platform = "nvidia";
    o.budget_s = budget_of(reqs[i]);
    try {
      auto sel = select_ncu_kernel(parts[i], names[i].empty() ? std::nullopt : std::optional<std::string>(names[i]));
      o.ok = true;
      o.kernel_name = sel.kernel_name;
      o.metrics = sel.metrics;
      nlohmann::json detail = sel;
      for (const auto& [k, v] : common.items()) detail[k] = v;
      detail["batch"]["index"] = i;
      o.detail = detail;
      b.got[i] = std::move(o);
      ++attributed;
    } catch (const std::exception&) {
      // Rows, but not of its kernel: profiled again on its own.
    }
  }
  if (attributed < reqs.size()) b.why_not = "no rows of this kernel in the batch's output";
  return attributed;
}

/// The batch's one ncu process. Returns the outcome of each kernel whose rows it attributed; the
/// others (no row after their marker: the batch failed or ended before them, or the kernel failed in
/// it) are left empty, with why in `why_not`.
batch_run run_ncu_batch(const std::vector<kernel_profile_request>& reqs) {
  batch_run b;
  b.got.resize(reqs.size());
  kernel_profile_request br = reqs.front();
  std::vector<std::pair<std::string, std::string>> kernels;
  for (size_t i = 0; i < reqs.size(); ++i) kernels.emplace_back(fmt::format("k{}", i), reqs[i].code);
  const auto names = kernel_names_of(reqs);
  const double budget = batch_budget(reqs);
  br.budget_s = budget;
  br.kernel_id = "batch_" + sanitize_kernel_id(reqs.front().kernel_id);
  br.dir = (fs::path(reqs.front().dir).parent_path() / br.kernel_id).string();
  kernel_profile_outcome bo;
  bo.budget_s = budget;
  profile_session s(br, bo);
  try {
    const auto launcher = s.prepare(br.kernel_id, kernels);
    const auto binary = absolute_command(find_ncu_binary(br.kwargs, br.env));
    const bool sudo = ncu_sudo_requested(br.env);
    const auto filter = ncu_batch_filter(names);
    const double share = std::clamp(budget - 1.0, 1.0, br.per_command_cap_s > 0 ? br.per_command_cap_s : 1e9);
    auto inv = plan_ncu({s.python(), launcher, s.dir().string(), br.kernel_id, binary, filter, sudo, ""}, share);
    for (const auto& p : inv.expected_outputs) {
      std::error_code ec;
      fs::remove(p, ec);
    }
    auto& r = s.run(fmt::format("ncu (batch of {})", reqs.size()), inv.argv, s.child_env(inv.env_overrides),
                    s.timeout_for("ncu", "ncu batch", inv.timeout_s), inv.expected_outputs);
    b.wall_s = r.wall_s;
    // The wrapper exits 1 when one kernel of the batch failed: the others' rows still count.
    auto table = batch_table(s, r, inv, sudo, b);
    if (!table) {
      s.settle("failed: " + b.why_not);
      b.record = s.last_record();
      return b;
    }
    const nlohmann::json common{{"ncu_bin", binary}, {"kernel_filter", filter},
                                {"batch", {{"dir", s.dir().string()}, {"kernels", reqs.size()}, {"csv", inv.log_file}}}};
    const auto attributed = attribute_batch(reqs, names, split_ncu_batch(*table, reqs.size()), common, b);
    s.settle(fmt::format("accepted: {} of {} kernels attributed", attributed, reqs.size()));
    b.record = s.last_record();
  } catch (const profile_failure& f) {
    b.why_not = f.error;
  } catch (const std::exception& e) {
    b.why_not = std::string("profiler: ") + e.what();
  }
  return b;
}

/// The range the standby's ncu profiles: the wrapper's measured calls, whatever their kernels' names.
constexpr const char* standby_nvtx_include = "kagent_measured/";

} // namespace

// ---- a profiler started before its kernels exist (NVIDIA) -------------------------------------------

struct profiler_standby::process {
  kernel_profile_request like;   ///< the settings it serves; dir is its own directory
  kernel_profile_outcome scratch;
  std::unique_ptr<profile_session> session;
  ncu_invocation inv;
  std::string binary;
  bool sudo = false;
  double idle_s = 0;
  std::unique_ptr<background_process> run;  ///< ncu and its wrapper; killed and reaped by finish()
  /// Whether the device may be given back before ncu's report: only in a PID namespace of its own
  /// (bwrap), where nothing the program starts can leave the tree below it, and not with
  /// KAGENT_PROFILE_RELEASE=0. `own`: the profiler's processes (profiler_ancestors at the hand-over).
  bool may_release = false;
  std::vector<int> own;

  bool ended() const { return run->ended(); }
  /// Records a standby that served no batch in its own directory's invocations.jsonl, so that every
  /// profiler process of a run has a record: `why` says how it ended.
  void record_unused(const process_result& r, const std::string& why) {
    try {
      // No profile ran under it, so no profile budget applies: timeout 0 (its wait was bounded by idle_s).
      session->record("ncu (standby)", inv.argv, 0, 0, r, inv.expected_outputs);
      session->settle("unused: " + why);
    } catch (const std::exception&) {
    }
  }
  /// Kills it (when still running) and reaps its thread.
  process_result finish() { return run->finish(); }
};

profiler_standby::profiler_standby() = default;
profiler_standby::~profiler_standby() { stop(); }

int standby_depth(const kernel_profile_request& like) {
  const auto v = env_get(like.env, "KAGENT_NCU_STANDBY").value_or("");
  if (v.empty()) return like.device == "cpu" ? 1 : 2;
  if (v.size() == 1 && v[0] >= '0' && v[0] <= '4') return v[0] - '0';
  return 1;
}

void profiler_standby::stop() {
  for (auto& p : ps_) {
    const bool was_running = !p->ended();
    auto r = p->finish();
    p->record_unused(r, was_running ? "stopped while it waited for a batch" : "ended before any batch (" + r.describe() + ")");
  }
  ps_.clear();
}

bool profiler_standby::waiting() const { return running() > 0; }

int profiler_standby::running() const {
  return static_cast<int>(std::count_if(ps_.begin(), ps_.end(), [](const auto& p) { return !p->ended(); }));
}

void profiler_standby::reap() {
  for (auto it = ps_.begin(); it != ps_.end();) {
    if (!(*it)->ended()) {
      ++it;
      continue;
    }
    // Gone before its batch: waited idle_s for nothing (fine), or broken (counted: two in a row and
    // no standby starts again, every profile is a fresh one that reports what is wrong).
    auto r = (*it)->finish();
    const bool idle = r.out.find("standby: no batch") != std::string::npos;
    if (!idle) ++ended_early_;
    (*it)->record_unused(r, idle ? "no batch came within its idle time" : "ended before any batch (" + r.describe() + ")");
    it = ps_.erase(it);
  }
}

bool profiler_standby::start(const kernel_profile_request& like, double idle_s) {
  reap();
  last_like_ = like;
  last_idle_s_ = idle_s;
  if (like.platform != "nvidia" || like.dir.empty() || idle_s <= 0 || should_give_up()) return waiting();
  const int depth = standby_depth(like);
  while (static_cast<int>(ps_.size()) < depth && ended_early_ < 2)
    if (!start_one(like, idle_s)) break;
  return waiting();
}

bool profiler_standby::start_one(const kernel_profile_request& like, double idle_s) {
  auto p = std::make_unique<process>();
  p->like = like;
  p->like.code.clear();
  p->like.budget_s = budget_of(like);
  // A directory of its own, never one an earlier session of this run left (a resumed run starts its
  // numbering again): a stale batch.json there would be run as if it were this standby's batch.
  std::string id;
  std::error_code ec;
  do {
    id = sanitize_kernel_id(fmt::format("{}_{}", like.kernel_id.empty() ? "standby" : like.kernel_id, ++seq_));
  } while (fs::exists(fs::path(like.dir).parent_path() / id, ec) && seq_ < 100000);
  p->like.kernel_id = id;
  p->like.dir = (fs::path(like.dir).parent_path() / id).string();
  p->idle_s = idle_s;
  p->session = std::make_unique<profile_session>(p->like, p->scratch);
  try {
    const auto launcher = p->session->prepare(id, {}, idle_s);
    p->binary = absolute_command(find_ncu_binary(like.kwargs, like.env));
    p->sudo = ncu_sudo_requested(like.env);
    ncu_target t{p->session->python(), launcher, p->session->dir().string(), id, p->binary, "", p->sudo, standby_nvtx_include};
    p->inv = plan_ncu(t, idle_s + p->like.budget_s);
    for (const auto& f : p->inv.expected_outputs) {
      std::error_code ec;
      fs::remove(f, ec);
    }
    // It waits up to idle_s for its batch, then runs that under the budget: its deadline covers both.
    auto spec = p->session->spec_for(p->inv.argv, p->session->child_env(p->inv.env_overrides),
                                     idle_s + p->like.budget_s + 30);
    p->may_release = std::find(spec.argv.begin(), spec.argv.end(), "--unshare-pid") != spec.argv.end() &&
                     env_get(like.env, "KAGENT_PROFILE_RELEASE").value_or("") != "0";
    p->run = std::make_unique<background_process>(
        std::move(spec), fmt::format("ncu standby {} of device profile dir {}", started_ + 1, p->like.dir));
  } catch (const std::exception&) {
    ++ended_early_;  // no ncu, no wrapper: a fresh profile reports it
    return false;
  }
  ++started_;
  ps_.push_back(std::move(p));
  return true;
}

bool profiler_standby::start_next() {
  if (!last_like_ || env_get(last_like_->env, "KAGENT_NCU_STANDBY_AHEAD").value_or("") == "0") return waiting();
  const auto like = *last_like_;  // start() keeps its own copy
  return start(like, last_idle_s_);
}

std::unique_ptr<profiler_standby::process> profiler_standby::take(const std::vector<kernel_profile_request>& reqs) {
  reap();
  if (reqs.empty()) return nullptr;
  auto serves = [&](const std::unique_ptr<process>& p) {
    return std::all_of(reqs.begin(), reqs.end(), [&](const auto& r) { return same_profiler_process(p->like, r); });
  };
  auto pick = ps_.end();
  for (auto it = ps_.begin(); it != ps_.end(); ++it) {
    if (!serves(*it)) continue;
    if (pick == ps_.end()) pick = it;  // the oldest: ready soonest
    if (fs::exists((*it)->session->dir() / "standby.ready")) {
      pick = it;
      break;
    }
  }
  if (pick == ps_.end()) return nullptr;
  auto p = std::move(*pick);
  ps_.erase(pick);
  ended_early_ = 0;
  ++served_;
  return p;
}

// ---- what of a profile's process tree is the profiler's own -----------------------------------------

std::vector<int> profiler_ancestors(const std::vector<proc_entry>& tree, int program_pid) {
  std::map<int, const proc_entry*> by_pid;
  const proc_entry* program = nullptr;
  for (const auto& p : tree) {
    by_pid[p.pid] = &p;
    if (!p.nspid.empty() && p.nspid.back() == program_pid) {
      if (program) return {};  // two processes that call themselves that: no telling which
      program = &p;
    }
  }
  std::vector<int> out;
  if (!program || tree.empty()) return out;
  for (auto it = by_pid.find(program->ppid); it != by_pid.end(); it = by_pid.find(it->second->ppid)) {
    out.push_back(it->first);
    if (it->first == tree.front().pid || out.size() > tree.size()) break;
  }
  if (out.empty() || out.back() != tree.front().pid) return {};  // not below the root
  return out;
}

std::vector<proc_entry> program_processes(const std::vector<proc_entry>& tree, const std::vector<int>& own) {
  std::vector<proc_entry> out;
  for (const auto& p : tree)
    if (std::find(own.begin(), own.end(), p.pid) == own.end()) out.push_back(p);
  return out;
}

namespace {

/// A standby batch handed over: what run_ncu_standby's two halves share.
struct standby_flight {
  std::vector<kernel_profile_request> reqs;
  std::unique_ptr<profiler_standby::process> p;
  std::vector<std::string> ids;
  double handed = 0;       ///< the session's seconds at the hand-over
  double limit = 0;        ///< the batch's wait, from the hand-over
  double released = -1;    ///< the session's seconds when the device was given back (< 0: it was not)
  bool in_time = true;
  std::string why_not;     ///< the hand-over itself failed
};

/// Before the hand-over: the profiler's own processes are the ancestors of the program, which wrote
/// its pid (as it sees it) into standby.ready before any candidate code could run. A standby not ready
/// yet (its program could read the batch before this reads the file) or not found: false, and the
/// device is kept to the end.
bool identify_profiler(profiler_standby::process& p) {
  const auto ready = read_file_if_present((p.session->dir() / "standby.ready").string());
  if (!ready) return false;
  int pid = 0;
  std::istringstream(*ready) >> pid;
  const int root = p.run->pid();
  if (pid <= 0 || root <= 0) return false;
  p.own = profiler_ancestors(process_tree(root), pid);
  return !p.own.empty();
}

/// The device may be given back: nothing is left below the standby's root but the profiler's own
/// processes (the program, and everything it started, have exited and been reaped).
bool program_gone(profiler_standby::process& p) {
  const int root = p.run->pid();
  if (root <= 0) return false;  // reaped: ncu has ended, the wait sees it
  const auto tree = process_tree(root);
  return !tree.empty() && program_processes(tree, p.own).empty();
}

/// The first half: the kernels go into the standby's directory, the batch file is renamed into place
/// (the wrapper polls for it), and the process is waited for under the batch's budget, timed from the
/// hand-over, until it ends or (with `release`, where it may) its program has exited.
standby_flight hand_over(const std::vector<kernel_profile_request>& reqs, std::unique_ptr<profiler_standby::process> p,
                         bool release) {
  standby_flight f;
  f.reqs = reqs;
  f.p = std::move(p);
  auto& s = *f.p->session;
  release = release && f.p->may_release && identify_profiler(*f.p);
  try {
    nlohmann::json items = nlohmann::json::array();
    for (size_t i = 0; i < reqs.size(); ++i) {
      f.ids.push_back(fmt::format("k{}", i));
      const auto kernel = s.dir() / (f.ids.back() + "_kernel.py");
      write_text(kernel, reqs[i].code);
      items.push_back({f.ids.back(), kernel.string()});
    }
    const auto batch = s.dir() / "batch.json";
    write_text(s.dir() / "batch.json.tmp", nlohmann::json{{"kernels", items}}.dump() + "\n");
    fs::rename(s.dir() / "batch.json.tmp", batch);
  } catch (const std::exception& e) {
    f.p->finish();
    f.why_not = std::string("profiler: cannot hand the batch to the standby: ") + e.what();
    return f;
  }
  f.handed = s.elapsed();
  f.limit = std::max(1.0, batch_budget(reqs) - kill_grace_s);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(f.limit);
  while (true) {
    const auto left = std::chrono::duration<double>(until - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      f.in_time = f.p->run->ended();
      break;
    }
    // Polled every 50 ms while it may be released (a scan of /proc), else one wait to the end.
    const double slice = release ? std::min(left, 0.05) : left;
    if (f.p->run->wait(std::chrono::duration<double>(slice)) == background_process::waited::ended) break;
    if (release && program_gone(*f.p)) {
      f.released = s.elapsed();
      break;
    }
  }
  return f;
}

/// The second half: waits for the process (what is left of the batch's wait), records it, and
/// attributes each kernel's rows: the launches inside its range kagent_kernel:kI.
batch_run complete(standby_flight& f) {
  batch_run b;
  b.got.resize(f.reqs.size());
  if (!f.why_not.empty()) {
    b.why_not = f.why_not;
    return b;
  }
  auto& p = *f.p;
  auto& s = *p.session;
  const auto& reqs = f.reqs;
  if (f.released >= 0) {
    const double left = f.limit - (s.elapsed() - f.handed);
    f.in_time = left > 0 && p.run->wait(std::chrono::duration<double>(left)) == background_process::waited::ended;
  }
  auto r = p.finish();
  if (!f.in_time && !stop_requested()) {
    r.timed_out = true;  // killed by us at the budget
    r.stopped = false;
  }
  auto& rec = s.record(fmt::format("ncu (standby, batch of {})", reqs.size()), p.inv.argv, f.limit, f.handed, r,
                       p.inv.expected_outputs);
  b.wall_s = rec.wall_s;
  if (f.released >= 0) b.report_s = std::max(0.0, s.elapsed() - f.released);
  auto lead = fmt::format("the standby started {:.1f} s before its batch", f.handed);
  if (f.released >= 0)
    lead += fmt::format("; the device was given back {:.2f} s after the hand-over, its program gone, {:.2f} s before "
                        "ncu ended",
                        f.released - f.handed, b.report_s);
  if (r.out.find(fmt::format("standby: batch of {} received", reqs.size())) == std::string::npos && !r.timed_out) {
    // It ended without running this batch (a crash at start-up, an early exit): nothing it wrote counts.
    b.why_not = "the standby profiler ended before it ran its batch (" + r.describe() + ")";
    s.settle("failed: " + b.why_not);
    b.record = s.last_record();
    return b;
  }
  auto table = batch_table(s, rec, p.inv, p.sudo, b);
  if (!table) {
    s.settle("failed: " + b.why_not + "; " + lead);
    b.record = s.last_record();
    return b;
  }
  const nlohmann::json common{{"ncu_bin", p.binary},
                              {"kernel_filter", ""},
                              {"nvtx_include", standby_nvtx_include},
                              {"batch", {{"dir", s.dir().string()}, {"kernels", reqs.size()}, {"csv", p.inv.log_file},
                                         {"standby_lead_s", f.handed}, {"report_s", b.report_s}}}};
  const auto attributed = attribute_batch(reqs, kernel_names_of(reqs), split_ncu_by_range(*table, f.ids), common, b);
  s.settle(fmt::format("accepted: {} of {} kernels attributed; {}", attributed, reqs.size(), lead));
  b.record = s.last_record();
  return b;
}

/// A kernel a batch did not deliver, profiled on its own with what the batch (`used_s`) left of its
/// budget; the batch's record (when it ran) goes first in its records and its invocations.jsonl.
kernel_profile_outcome profile_alone(kernel_profile_request req, double used_s,
                                     const std::optional<invocation_record>& batch_record, const std::string& why) {
  const double budget = budget_of(req);
  req.budget_s = std::max(1.0, budget - used_s);
  auto o = profile_uncached(req);
  o.budget_s = budget;
  if (batch_record) {
    o.records.insert(o.records.begin(), *batch_record);
    prepend_invocation_record(req.dir, *batch_record, "rejected: " + why + "; profiled on its own");
  }
  return o;
}

/// The kernels' outcomes from a batch's process: each attributed one gets the batch's record, its
/// kernel and its metrics.json in its own dir; one the batch did not deliver is profiled on its own
/// with what the batch left of its budget, the batch's record first in its invocations (or, without
/// `alone`, comes back with `redo` and that record, for its owner to profile on the device and then
/// prepend_invocation_record).
std::vector<kernel_profile_outcome> finish_batch(const std::vector<kernel_profile_request>& reqs, batch_run& b,
                                                 bool alone = true) {
  std::vector<kernel_profile_outcome> out;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const auto& req = reqs[i];
    if (b.got[i]) {
      auto o = std::move(*b.got[i]);
      if (b.record) o.records.push_back(*b.record);
      o.wall_s = b.wall_s - b.report_s;
      o.report_s = b.report_s;
      add_roofline(req, o);
      const auto id = sanitize_kernel_id(req.kernel_id.empty() ? "profile" : req.kernel_id);
      try {
        std::error_code ec;
        fs::remove(fs::path(req.dir) / "invocations.jsonl", ec);
        prepend_invocation_record(req.dir, o.records.empty() ? invocation_record{} : o.records.back(),
                       fmt::format("accepted (kernel {} of a batch of {})", i + 1, reqs.size()));
        write_text(fs::path(req.dir) / (id + "_kernel.py"), req.code);
        write_metrics_file(req.dir, req, o, o.detail);
      } catch (const std::exception&) {
      }
      out.push_back(std::move(o));
      continue;
    }
    if (!alone) {
      kernel_profile_outcome o;
      o.platform = req.platform;
      o.redo = true;
      o.error = b.why_not;
      o.invocation = b.record ? b.record->name : "setup";
      o.budget_s = budget_of(req);
      o.wall_s = b.wall_s - b.report_s;
      o.report_s = b.report_s;
      if (b.record) o.records.push_back(*b.record);  // its owner's profile of it will put it first in its file
      out.push_back(std::move(o));
      continue;
    }
    out.push_back(profile_alone(req, b.wall_s, b.record, b.why_not));
  }
  return out;
}

/// Several kernels, none in the cache: through a standby (handed over), one batch process, or each on
/// its own.
std::vector<kernel_profile_outcome> profile_batch_uncached(const std::vector<kernel_profile_request>& reqs) {
  if (!batchable(reqs)) {
    std::vector<kernel_profile_outcome> out;
    for (const auto& r : reqs) out.push_back(profile_uncached(r));
    return out;
  }
  auto b = run_ncu_batch(reqs);
  return finish_batch(reqs, b);
}

/// The cache's part of a profile of several kernels: what it had, what went to the profiler.
struct cache_split {
  std::vector<std::optional<kernel_profile_outcome>> got;
  std::vector<kernel_profile_request> todo;
  std::vector<size_t> at;
  std::vector<std::string> keys;

  explicit cache_split(const std::vector<kernel_profile_request>& reqs) : got(reqs.size()) {
    for (size_t i = 0; i < reqs.size(); ++i) {
      const auto key = reqs[i].cache_root.empty() || reqs[i].dir.empty() ? std::string{} : profile_cache_key(reqs[i]);
      if (auto hit = cached_outcome(reqs[i], key)) {
        got[i] = std::move(hit);
        continue;
      }
      todo.push_back(reqs[i]);
      at.push_back(i);
      keys.push_back(key);
    }
  }
  /// The profiler's outcomes of `todo`, in order, stored in the cache (not one to be done again), and
  /// every request's outcome.
  std::vector<kernel_profile_outcome> merge(std::vector<kernel_profile_outcome> done) {
    for (size_t k = 0; k < done.size() && k < at.size(); ++k) {
      if (!done[k].redo) store_cached_profile(todo[k].cache_root, keys[k], done[k]);
      got[at[k]] = std::move(done[k]);
    }
    std::vector<kernel_profile_outcome> out;
    for (auto& g : got) out.push_back(g ? std::move(*g) : kernel_profile_outcome{});
    return out;
  }
};

} // namespace

struct profile_tail::state {
  cache_split split;
  standby_flight flight;
  bool finished = false;
};

profile_tail::profile_tail(std::unique_ptr<state> s) : s_(std::move(s)) {}
profile_tail::~profile_tail() {
  if (s_ && !s_->finished) s_->flight.p->finish();  // abandoned: ncu is killed and reaped
}

double profile_tail::held_s() const { return s_->flight.released - s_->flight.handed; }

std::vector<kernel_profile_outcome> profile_tail::finish() {
  s_->finished = true;
  batch_run b;
  try {
    b = complete(s_->flight);
  } catch (const std::exception& e) {
    // Our own fault (a record we could not write, say): every kernel of the batch is done again. (The
    // process, if still running, is killed and reaped with the flight.)
    b = batch_run{};
    b.got.resize(s_->flight.reqs.size());
    b.why_not = std::string("profiler: ") + e.what();
  }
  return s_->split.merge(finish_batch(s_->flight.reqs, b, false));
}

started_profile start_profile_kernels(const std::vector<kernel_profile_request>& reqs, profiler_standby* standby,
                                      bool next_ahead) {
  // The cached ones first: only the others reach the profiler (together, where they can).
  started_profile out;
  cache_split split(reqs);
  auto taken = standby ? standby->take(split.todo) : nullptr;
  if (!taken) {
    out.outcomes = split.merge(profile_batch_uncached(split.todo));
    return out;
  }
  // The next standby starts now, beside this batch: its ncu, interpreter, torch and CUDA context load
  // while this one replays, so a profile that follows soon finds it ready (it launches nothing and
  // holds no input until its own batch, so it does not disturb this one's measurement).
  if (next_ahead) standby->start_next();
  auto flight = hand_over(split.todo, std::move(taken), true);
  if (flight.released < 0) {
    auto b = complete(flight);
    out.outcomes = split.merge(finish_batch(split.todo, b));
    return out;
  }
  out.tail = std::make_unique<profile_tail>(
      std::unique_ptr<profile_tail::state>(new profile_tail::state{std::move(split), std::move(flight)}));
  return out;
}

std::vector<kernel_profile_outcome> profile_kernels(const std::vector<kernel_profile_request>& reqs) {
  return profile_kernels(reqs, nullptr);
}

std::vector<kernel_profile_outcome> profile_kernels(const std::vector<kernel_profile_request>& reqs,
                                                   profiler_standby* standby, bool next_ahead) {
  auto started = start_profile_kernels(reqs, standby, next_ahead);
  if (!started.tail) return std::move(started.outcomes);
  // Given back early, but this caller waits for the whole profile: a kernel to be done again is
  // profiled on its own here, as after any batch, with what the batch left of its budget.
  auto out = started.tail->finish();
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].redo) continue;
    const auto record = out[i].records.empty() ? std::nullopt : std::optional<invocation_record>(out[i].records.front());
    out[i] = profile_alone(reqs[i], out[i].wall_s + out[i].report_s, record, out[i].error);
  }
  return out;
}

} // namespace kagent
