#include "platform/nvidia/ncu_plan.hpp"

#include <filesystem>
#include <system_error>

#include <unistd.h>

#include "platform/common/errors.hpp"
#include "platform/profile_core/profile_common.hpp"

namespace fs = std::filesystem;

namespace kagent {

const std::vector<std::string>& ncu_metric_list() {
  static const std::vector<std::string> list{
      "launch__occupancy_limit_blocks",
      "launch__occupancy_limit_registers",
      "launch__occupancy_limit_shared_mem",
      "launch__registers_per_thread",
      "launch__shared_mem_per_block_allocated",
      "sm__cycles_active.avg",
      "sm__warps_active.avg.pct_of_peak_sustained_active",
      "sm__inst_executed.sum",
      "sm__inst_executed_pipe_fp32.avg.pct_of_peak_sustained_active",
      "sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_active",
      "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
      "dram__bytes_read.sum",
      "dram__bytes_write.sum",
      "dram__throughput.avg.pct_of_peak_sustained_elapsed",
      "dram__bytes.sum.per_second",
      "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
      "l1tex__t_sector_hit_rate.pct",
      "l1tex__throughput.avg.pct_of_peak_sustained_active",
      "lts__t_sector_hit_rate.pct",
      "lts__throughput.avg.pct_of_peak_sustained_active",
      "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",
      "smsp__sass_average_branch_targets_threads_uniform.pct",
      "smsp__warp_issue_stalled_memory_dependency_per_warp_active.pct",
      "smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct",
      "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct",
      "smsp__warp_issue_stalled_barrier_per_warp_active.pct",
      "smsp__warp_issue_stalled_branch_resolving_per_warp_active.pct",
      "sm__throughput.avg.pct_of_peak_sustained_elapsed",
      "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
      "gpu__time_duration.sum",
  };
  return list;
}

ncu_invocation plan_ncu(const ncu_target& t, double timeout_s) {
  auto need = [](const std::string& v, const char* what) {
    if (v.empty()) throw user_error(std::string("ncu plan: ") + what + " is empty");
  };
  need(t.python, "python interpreter");
  need(t.wrapper, "wrapper script");
  need(t.output_dir, "output directory");
  need(t.kernel_id, "kernel id");
  need(t.binary, "ncu binary");
  ncu_invocation inv;
  inv.cwd = t.output_dir;
  inv.timeout_s = timeout_s;
  inv.uses_sudo = t.use_sudo;
  inv.env_overrides["TRITON_CACHE_DIR"] = (fs::path(t.output_dir) / ".triton_cache").string();
  inv.log_file = (fs::path(t.output_dir) / (sanitize_kernel_id(t.kernel_id) + "_ncu.csv")).string();
  inv.expected_outputs = {inv.log_file};
  if (t.use_sudo)
    inv.argv = {"sudo", "-E",
                "--preserve-env=PATH,LD_LIBRARY_PATH,CUDA_VISIBLE_DEVICES,PYTHONPATH,TRITON_CACHE_DIR,"
                "TORCH_EXTENSIONS_DIR,CONDA_PREFIX,CONDA_DEFAULT_ENV"};
  std::string metrics;
  for (const auto& m : ncu_metric_list()) metrics += (metrics.empty() ? "" : ",") + m;
  for (const char* a : {"--csv", "--page", "raw", "--print-units", "base", "--kernel-name-base", "demangled",
                        "--target-processes", "all", "--replay-mode", "kernel", "--profile-from-start", "on"})
    inv.argv.emplace_back(a);
  inv.argv.insert(inv.argv.begin() + (t.use_sudo ? 3 : 0), t.binary);
  inv.argv.insert(inv.argv.end(), {"--log-file", inv.log_file, "--metrics", metrics});
  if (!t.nvtx_include.empty()) {
    // No name is known, but PyTorch's own kernels in the range (a fill, a dtype conversion) are
    // never what the search reads (is_pytorch_kernel; SPEC §5.2): leaving them out
    // saved 0.45 s of replay each on an H100 (RESULTS, seventh session).
    inv.argv.insert(inv.argv.end(), {"--nvtx", "--nvtx-include", t.nvtx_include, "--kernel-name",
                                     std::string("regex:") + not_pytorch_kernel_regex});
  } else if (!t.kernel_name.empty()) {
    inv.kernel_filter = t.kernel_name;
    inv.argv.insert(inv.argv.end(), {"--kernel-name", t.kernel_name});
  }
  inv.argv.insert(inv.argv.end(), {t.python, t.wrapper});
  return inv;
}

bool ncu_sudo_requested(const env_map& env) {
  return env_get(env, "KAGENT_NCU_USE_SUDO").value_or("") == "1" ||
         env_get(env, "KERNELAGENT_NCU_USE_SUDO").value_or("") == "1";
}

std::string find_ncu_binary(const platform_kwargs& kw, const env_map& env,
                            const std::vector<std::string>& fallback_dirs) {
  auto is_exec = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  if (!kw.ncu_bin_path.empty()) {
    if (!is_exec(kw.ncu_bin_path))
      throw user_error("platform_kwargs.ncu_bin_path: '" + kw.ncu_bin_path +
                       "' is not an executable file (expected the path of Nsight Compute's ncu)");
    return kw.ncu_bin_path;
  }
  if (auto p = find_on_path("ncu", env_get(env, "PATH").value_or("")); !p.empty()) return p;
  std::string tried = "$PATH";
  for (const auto& d : fallback_dirs) {
    fs::path cand = fs::path(d) / "ncu";
    if (is_exec(cand)) return cand.string();
    tried += ", " + d;
  }
  throw run_error("ncu not found (looked in " + tried + "); install Nsight Compute or set platform_kwargs.ncu_bin_path");
}

} // namespace kagent
