// `kagent-actors inspect-profile rocm|nvidia ...`: parses profiler output files exactly as a run
// does and prints the merged metrics, the chosen kernel and dispatch, and the roofline verdict. An
// unusable input prints the same error a run records (exit 1); bad usage or an unknown GPU exits 2.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <iostream>

#include "app/command.hpp"
#include "platform/common/errors.hpp"
#include "platform/gpu/specs.hpp"
#include "platform/nvidia/ncu_parse.hpp"
#include "platform/nvidia/nvidia_roofline.hpp"
#include "platform/rocm/rocm_roofline.hpp"
#include "platform/rocm/rocprof_parse.hpp"

namespace kagent::app {
namespace {

struct inspect_args {
  std::string stats, trace, ncu_csv, gpu_name, kernel;
  std::vector<std::string> pmc;
  bool json = false;
};

std::string num(double v) {
  if (std::isfinite(v) && std::fabs(v) < 1e15 && v == std::floor(v)) return fmt::format("{:.0f}", v);
  auto s = fmt::format("{:.6f}", v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

std::string pct(const std::optional<double>& v) { return v ? num(*v) + "%" : "unavailable"; }

/// The spec row for --gpu-name of the right vendor; user_error otherwise.
gpu_specs specs_for(const std::string& name, const std::string& vendor) {
  auto key = resolve_gpu_name(name);
  auto row = key ? find_gpu_specs(*key) : std::nullopt;
  if (!row) {
    std::string known;
    for (const auto& k : known_gpu_names()) known += (known.empty() ? "" : ", ") + k;
    throw user_error("inspect-profile: --gpu-name '" + name + "' is not in the GPU specs database (known: " + known + ")");
  }
  if ((vendor == "rocm") != (row->vendor == "amd"))
    throw user_error("inspect-profile " + vendor + ": --gpu-name '" + name + "' is a " +
                     (row->vendor == "amd" ? "ROCm" : "NVIDIA") + " GPU");
  return *row;
}

void print_text(const std::string& kernel, const std::string& dispatch_line, const metric_map& metrics,
                const roofline_result& r, const roofline_settings& cfg, const gpu_specs& gpu) {
  std::cout << "kernel:   " << kernel << "\n" << "dispatch: " << dispatch_line << "\n" << "metrics:\n";
  size_t width = 0;
  for (const auto& [k, v] : metrics) width = std::max(width, k.size());
  for (const auto& [k, v] : metrics) std::cout << fmt::format("  {:<{}}  {}\n", k, width, num(v));
  std::cout << "roofline (" << r.vendor << ", " << gpu.name << "):\n"
            << "  compute SOL: " << pct(r.compute_sol_pct) << "\n"
            << "  memory SOL:  " << pct(r.memory_sol_pct) << "\n"
            << "  efficiency:  " << num(r.efficiency_pct) << "% (headroom " << num(r.headroom_pct) << "%)\n"
            << "  bottleneck:  " << r.bottleneck << "\n"
            << "  at roofline: " << (r.at_roofline ? "yes" : "no") << " (threshold " << num(cfg.sol_threshold_pct)
            << "%)\n";
  if (r.vendor == "nvidia") std::cout << "  tensor cores: " << (r.uses_tensor_cores ? "yes" : "no") << "\n";
  for (const auto& [k, v] : r.details) std::cout << "  " << k << ": " << num(v) << "\n";
  for (const auto& n : r.notes) std::cout << "  note: " << n << "\n";
  for (const auto& w : r.warnings) std::cout << "  warning: " << w << "\n";
}

int run_rocm(const inspect_args& a) {
  auto gpu = specs_for(a.gpu_name, "rocm");
  auto profile = load_rocprof_profile(a.stats, a.trace, a.pmc,
                                      a.kernel.empty() ? std::nullopt : std::optional<std::string>(a.kernel));
  rocm_roofline_analyzer an({}, gpu);
  auto r = an.analyze(profile.metrics);
  if (a.json) {
    nlohmann::json j{{"vendor", "rocm"},      {"gpu", gpu.name},  {"kernel", profile.kernel_name},
                     {"dispatch", profile.dispatch}, {"metrics", profile.metrics}, {"raw_counters", profile.raw_counters},
                     {"roofline", r},         {"roofline_config", an.config()}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  const auto& d = profile.dispatch;
  std::string line = fmt::format("id {}, {} ms (agent {}, grid {}, workgroup {})",
                                 d.dispatch_id ? std::to_string(*d.dispatch_id) : std::string("?"),
                                 num(d.duration_ms()), d.agent.empty() ? "?" : d.agent,
                                 d.grid_size.empty() ? "?" : d.grid_size,
                                 d.workgroup_size.empty() ? "?" : d.workgroup_size);
  print_text(profile.kernel_name, line, profile.metrics, r, an.config(), gpu);
  return 0;
}

int run_nvidia(const inspect_args& a) {
  auto gpu = specs_for(a.gpu_name, "nvidia");
  auto table = load_ncu_csv(a.ncu_csv, a.kernel);
  auto sel = select_ncu_kernel(table, a.kernel.empty() ? std::nullopt : std::optional<std::string>(a.kernel));
  nvidia_roofline_analyzer an({});
  auto r = an.analyze(sel.metrics);
  if (a.json) {
    nlohmann::json j{{"vendor", "nvidia"}, {"gpu", gpu.name},     {"kernel", sel.kernel_name},
                     {"dispatch", {{"id", sel.id ? nlohmann::json(*sel.id) : nlohmann::json(nullptr)},
                                   {"dispatch_count", sel.dispatch_count},
                                   {"chosen_by_name", sel.chosen_by_name}}},
                     {"metrics", sel.metrics}, {"roofline", r}, {"roofline_config", an.config()}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::string line = fmt::format("ID {} (last of {} launches of this kernel; chosen {})",
                                 sel.id ? std::to_string(*sel.id) : std::string("?"), sel.dispatch_count,
                                 sel.chosen_by_name ? "by name" : "as the busiest kernel without at::");
  print_text(sel.kernel_name, line, sel.metrics, r, an.config(), gpu);
  return 0;
}

int guarded(const std::function<int()>& f) {
  try {
    return f();
  } catch (const user_error& e) {
    std::cerr << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";  // verbatim: the same line a run records
    return 1;
  }
}

const register_command reg{"inspect-profile", [](CLI::App& root, int& exit_code) {
  auto args = std::make_shared<inspect_args>();
  auto* ip = root.add_subcommand("inspect-profile",
                                 "Parse rocprofv3 or ncu output files as a run does; print metrics and roofline");
  ip->require_subcommand(1);
  auto* rocm = ip->add_subcommand("rocm", "rocprofv3 CSVs: kernel stats, kernel trace and PMC counter files");
  rocm->add_option("--stats", args->stats, "<prefix>_kernel_stats.csv")->required();
  rocm->add_option("--trace", args->trace, "<prefix>_kernel_trace.csv")->required();
  rocm->add_option("--pmc", args->pmc, "<prefix>_counter_collection.csv (repeatable)")->required();
  rocm->add_option("--gpu-name", args->gpu_name, "GPU name, e.g. 'AMD Instinct MI300X' or gfx942")->required();
  rocm->add_option("--kernel", args->kernel, "kernel name (default: the busiest kernel without at::)");
  rocm->add_flag("--json", args->json, "print JSON");
  rocm->callback([args, &exit_code] { exit_code = guarded([&] { return run_rocm(*args); }); });
  auto* nv = ip->add_subcommand("nvidia", "ncu --csv --page raw output");
  nv->add_option("--ncu-csv", args->ncu_csv, "the ncu --log-file CSV")->required();
  nv->add_option("--gpu-name", args->gpu_name, "GPU name, e.g. 'NVIDIA H200'")->required();
  nv->add_option("--kernel", args->kernel, "kernel name (default: the busiest kernel without at::)");
  nv->add_flag("--json", args->json, "print JSON");
  nv->callback([args, &exit_code] { exit_code = guarded([&] { return run_nvidia(*args); }); });
}};

} // namespace
} // namespace kagent::app
