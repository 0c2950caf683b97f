#pragma once
// Nsight Compute planning (SPEC §5.2, §14 B.86, B.107).
//
// Selection choice: a kernel-name filter (`--kernel-name <triton kernel>`), every launch of that
// kernel profiled, and the parser takes its LAST dispatch — the wrapper's measured call after its
// three warm-ups. Why not `--launch-skip/--launch-count`: the number of launches before the measured
// one is unknown (Triton autotune runs every config inside the first call), so any fixed skip can
// land on a warm-up or autotune launch, and a count cap keeps the FIRST launches, cutting off the
// measured one. Why not an NVTX range: it needs the wrapper's cooperation, and a wrapper without the
// range profiles nothing. The filter keeps PyTorch's at:: conversion kernels out of the replay; the
// H200 measurements (MEASUREMENTS.md) show the filter does not change wall time, which is dominated
// by interpreter start-up, so profiling the few extra launches of the target kernel costs nothing
// that matters. Without a known name there is no filter and the parser picks the busiest non-at::
// kernel (the same rule as ROCm, SPEC §14 B.85).
#include <map>
#include <string>
#include <vector>

#include "platform/common/env.hpp"
#include "platform/config/config.hpp"

namespace kagent {

/// The 29 metrics of SPEC §5.2, then gpu__time_duration.sum (the busiest-kernel rule and the
/// duration need it).
const std::vector<std::string>& ncu_metric_list();

struct ncu_target {
  std::string python;
  std::string wrapper;      ///< ncu_wrapper.py
  std::string output_dir;   ///< artifacts dir; also the cwd
  std::string kernel_id;    ///< unique per profiled kernel; names the log file (SPEC §14 B.107)
  std::string binary;       ///< see find_ncu_binary
  std::string kernel_name;  ///< the Triton kernel's name; empty: no filter
  bool use_sudo = false;    ///< prefix `sudo -E --preserve-env=...`
  /// Non-empty: `--nvtx --nvtx-include <it>` and, instead of a name, `regex:` not_pytorch_kernel_regex
  /// (a standby profiler is started before its kernels' names are known; "kagent_measured/" profiles
  /// exactly the wrapper's measured calls, less PyTorch's own kernels in them).
  std::string nvtx_include;
};

struct ncu_invocation {
  std::vector<std::string> argv;
  std::string log_file;                             ///< the CSV (--log-file)
  std::vector<std::string> expected_outputs;        ///< delete before, accept only if created
  std::string cwd;
  std::map<std::string, std::string> env_overrides; ///< TRITON_CACHE_DIR
  double timeout_s = 300;
  bool uses_sudo = false;
  std::string kernel_filter;                        ///< the name passed to --kernel-name, or ""
};

/// `[sudo -E --preserve-env=...] <ncu> --csv --page raw --print-units base --kernel-name-base demangled
///  --target-processes all --replay-mode kernel --profile-from-start on --log-file <dir>/<id>_ncu.csv
///  --metrics <list> [--kernel-name <name> | --nvtx --nvtx-include <range>] <python> <wrapper>`. Throws user_error on empty fields.
ncu_invocation plan_ncu(const ncu_target& t, double timeout_s = 300);

/// sudo requested through the environment: KAGENT_NCU_USE_SUDO=1 (or the original's
/// KERNELAGENT_NCU_USE_SUDO=1).
bool ncu_sudo_requested(const env_map& env);

/// platform_kwargs.ncu_bin_path (must exist: user_error), else `ncu` on $PATH, else each of
/// `fallback_dirs` (/usr/local/cuda/bin). Nothing found: run_error.
std::string find_ncu_binary(const platform_kwargs& kwargs, const env_map& env,
                            const std::vector<std::string>& fallback_dirs = {"/usr/local/cuda/bin"});

} // namespace kagent
