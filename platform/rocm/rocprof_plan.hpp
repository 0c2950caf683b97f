#pragma once
// rocprofv3 planning (SPEC §5.3, §14 A.1-A.6, A.20, A.21, A.36): which binary, which invocations,
// which input files, which output files each invocation will write, and how long each may run.
// Pure: nothing here runs a process; the profiler actor executes the plan.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "platform/common/env.hpp"
#include "platform/config/config.hpp"
#include "platform/profile_core/profile_common.hpp"

namespace kagent {

/// What to profile: one kernel through the wrapper script.
struct rocprof_target {
  std::string python;      ///< interpreter that runs the wrapper (as configured, not resolved)
  std::string wrapper;     ///< rocprof_wrapper.py
  std::string output_dir;  ///< artifacts dir: outputs, input files; also the cwd
  std::string kernel_id;   ///< unique per profiled kernel (e.g. "w2_r3_sol"); sanitised into names
  std::string binary;      ///< rocprofv3 path (see find_rocprof_binary)
};

/// One PMC counter group: alternatives tried in order within the same pass (TCC_EA0_* before
/// TCC_EA_*). A group that is not `required` may fail without failing the profile.
struct counter_group {
  std::vector<std::vector<std::string>> alternatives;
  bool required = true;
};

/// The six groups of SPEC §5.3 in order, then an optional MFMA group (SQ_INSTS_VALU_MFMA_MOPS_*)
/// that the compute SOL uses for matrix kernels when `with_mfma`.
std::vector<counter_group> rocprof_counter_groups(bool with_mfma = true);

/// One rocprofv3 command.
struct rocprof_invocation {
  std::string kind;                   ///< "stats" or "pmc"
  int pass = -1;                      ///< PMC group index i (0-based); -1 for stats
  int alternative = 0;                ///< j
  bool last_alternative = true;       ///< a failure here fails the pass
  bool required = true;               ///< a failed pass fails the profile
  std::vector<std::string> argv;      ///< argv[0] is the binary; the program follows "--"
  std::vector<std::string> counters;  ///< PMC counters of this invocation
  std::string input_file;             ///< the -i file (PMC only)
  std::string input_contents;         ///< what to write into it before running: "pmc: A B\n"
  std::string prefix;                 ///< the -o value, unique to this kernel and invocation
  /// Every file this invocation may write. Delete them all before running it, and accept only a
  /// file that exists afterwards (SPEC §14 A.20): a left-over from an earlier kernel is never read.
  std::vector<std::string> expected_outputs;
  /// Where the CSVs the parser needs may appear, in preference order (rocprofv3 puts a `-i` text
  /// pass under `pmc_1/`; older builds write beside the prefix). Stats: kernel_stats, kernel_trace.
  std::vector<std::string> stats_csv_candidates;
  std::vector<std::string> trace_csv_candidates;
  std::vector<std::string> counter_csv_candidates;
  double timeout_s = 600;             ///< set by apply_profile_budget
  std::string log_line;               ///< "[rocprof] Running PMC pass 3: TCC_EA0_RDREQ_sum"
};

struct rocprof_pass {
  int index = 0;
  bool required = true;
  std::vector<rocprof_invocation> alternatives;
};

struct rocprof_plan {
  std::string binary;
  std::string cwd;                                  ///< = output_dir
  std::map<std::string, std::string> env_overrides; ///< TRITON_CACHE_DIR=<dir>/.triton_cache
  rocprof_invocation stats;
  std::vector<rocprof_pass> passes;
  double budget_s = 0;                              ///< total the plan was budgeted for

  /// Every invocation in execution order, alternatives included (the worst case).
  std::vector<const rocprof_invocation*> all_invocations() const;
};

struct rocprof_plan_options {
  bool with_mfma = true;
  double total_budget_s = 1200;   ///< the whole profile (see apply_profile_budget)
  double per_command_cap_s = 600; ///< no single command waits longer than this
};

/// Builds the plan: a stats pass
///   <bin> --kernel-trace --stats --output-format csv -d <dir> -o <id>_stats -- <python> <wrapper>
/// and per counter group i, alternative j:
///   <bin> -i <dir>/<id>_input_pass<i>_<j>.txt --output-format csv -d <dir> -o <id>_pass<i>_<j> -- <python> <wrapper>
/// Throws user_error when python, wrapper, output_dir, kernel_id or binary is empty.
rocprof_plan plan_rocprof(const rocprof_target& target, const rocprof_plan_options& opts = {});

/// Splits `total_budget_s` over the worst-case number of invocations (every alternative runs), each
/// capped at `per_command_cap_s`, so a profile that takes every fallback still ends within the
/// budget (SPEC §14 A.21). Sets every invocation's timeout_s and returns the per-invocation share.
/// The profile runner does not use these nominal timeouts: it decides each command's timeout when it
/// starts (fair_command_timeout in platform/profiling/profile_runner.hpp).
double apply_profile_budget(rocprof_plan& plan, double total_budget_s, double per_command_cap_s = 600);

/// Finds rocprofv3 (SPEC §5.3, §10.3, §14 A.1, A.36): platform_kwargs.rocprof_bin_path, else
/// ncu_bin_path, else `rocprofv3` on $PATH (from `env`), beside the interpreter as written (a venv
/// symlink), beside the resolved interpreter, then each of `fallback_dirs`. A configured path must
/// exist and must not be the v1/v2 `rocprof`/`rocprofv2` (user_error). Nothing found: run_error.
std::string find_rocprof_binary(const platform_kwargs& kwargs, const env_map& env, const std::string& python,
                                const std::vector<std::string>& fallback_dirs = {"/opt/rocm/bin"});

/// Removes every expected output of `inv` (missing files are fine). Returns the paths it removed.
std::vector<std::string> remove_expected_outputs(const rocprof_invocation& inv);

/// The first candidate that exists, or nullopt. Call only after remove_expected_outputs + the run,
/// so that whatever exists was written by this invocation.
std::optional<std::string> first_existing(const std::vector<std::string>& candidates);

/// How a finished command ended (kept independent of the process runner's type).
struct tool_exit {
  int exit_code = 0;
  int term_signal = 0;
  bool timed_out = false;
  double timeout_s = 0;
};

/// What the runner does after one PMC invocation.
struct pmc_outcome {
  enum class action { accept, try_next, fail_pass } act = action::accept;
  std::string error;  ///< for fail_pass: "rocprof PMC pass N failed (rc=…)" etc.
};

/// SPEC §14 A.6, A.7, A.10: a non-zero exit (or death by signal), an exit 0 without a counter CSV,
/// or a CSV without counter rows moves to the next alternative; on the last alternative the pass
/// fails with `rocprof PMC pass N failed (rc=…)` (N is 1-based). A timeout fails the pass at once:
/// the budget is spent. `csv_has_rows` is whether the freshly written CSV holds any counter row.
pmc_outcome judge_pmc_attempt(const rocprof_invocation& inv, const tool_exit& ex, bool csv_exists,
                              bool csv_has_rows);

/// For the stats pass: nullopt when it may be parsed, else the error to record.
std::optional<std::string> judge_stats_attempt(const tool_exit& ex, bool stats_csv_exists, bool trace_csv_exists);

} // namespace kagent
