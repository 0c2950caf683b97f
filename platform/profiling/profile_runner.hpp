#pragma once
// The profile runner: executes the vendor's profile plan for ONE kernel (SPEC §5, §14 A.1-A.21,
// B.86, B.105, B.107) and turns what the tools wrote into flat metrics and a roofline verdict.
//
//   dir/<id>_kernel.py        the kernel source
//   dir/<id>_wrapper.py       a launcher: runs harness/profile_wrapper.py on that kernel and the problem
//   dir/invocations.jsonl     one JSON line per tool invocation (argv, exit, signal, timeout, wall time,
//                             start offset, produced files, verdict, output tail), appended as it ends
//   dir/metrics.json          the outcome: ok/error, kernel, flat metrics, roofline, parser detail
//   dir/tmp/, dir/.triton_cache/   the children's TMPDIR and Triton cache (nothing goes outside dir)
// Every command runs inside the request's sandbox (docs/sandbox.md), writable only in dir; what it
// writes into the records and metrics.json is redacted of secrets by value.
//
// ROCm: one stats pass, then one rocprofv3 pass per counter group, each trying its counter-name
// alternatives in order. NVIDIA: one ncu command filtered to the Triton kernel. Every command runs
// through run_process (its own process group, killed whole on expiry), one at a time. The whole profile
// has ONE budget: each command's timeout is its share of the worst case (every alternative run) and is
// further cut to what is left of the budget, so a profile never outlives `budget_s` (plus the last
// kill's grace). Blocking; meant for a detached actor.
#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "platform/common/env.hpp"
#include "platform/config/config.hpp"
#include "platform/process/proc_tree.hpp"
#include "platform/process/sandbox.hpp"
#include "platform/profile_core/roofline.hpp"

namespace kagent {

/// One tool invocation as it happened.
struct invocation_record {
  std::string name;                ///< "stats pass", "PMC pass 3", "PMC pass 3 (alt 2)", "ncu"
  std::vector<std::string> argv;
  bool started = false;            ///< false: the program could not be executed (see output_tail)
  int exit_code = -1;
  int term_signal = 0;
  bool timed_out = false;
  double timeout_s = 0;            ///< the timeout it ran under (after budgeting)
  double start_s = 0;              ///< seconds from the start of the profile
  double wall_s = 0;
  std::vector<std::string> produced_files;  ///< expected outputs that exist afterwards (all deleted before)
  std::string verdict;             ///< "accepted", "rejected: ...", "failed: ...", "optional pass failed: ..."
  std::string output_tail;         ///< stdout/stderr tails
};

struct kernel_profile_request {
  std::string platform;            ///< "rocm" | "nvidia" (the profiler component's platform)
  std::string code;                ///< the kernel source
  std::string kernel_id;           ///< unique per profile in the run; sanitised into file names
  std::string dir;                 ///< where everything of this profile goes (created)
  std::string python;              ///< interpreter for the wrapper
  std::string install_root;        ///< holds harness/profile_wrapper.py
  std::string problem_path;        ///< problem.py
  env_map env;                     ///< the child environment, already pinned to the device
  platform_kwargs kwargs;          ///< rocprof_bin_path / ncu_bin_path
  double budget_s = 0;             ///< the whole profile's budget; <= 0: default_profile_budget_s(1800)
  std::string gpu_name;            ///< specs row for the roofline (key, marketing or gfx name); "" = none
  roofline_config roofline;
  std::string kernel_name;         ///< "" = derive_kernel_name(code), else the busiest-kernel rule
  // What the wrapper runs; the defaults are what a GPU run needs.
  std::string device = "cuda";     ///< "cpu" runs the kernel in the Triton interpreter (tests, cpu runs)
  std::string dtype = "bfloat16";  ///< the evaluator's dtype; "auto" infers it from the code (SPEC §4.1)
  std::string size;                ///< KAGENT_PROBLEM_SIZE for the wrapper ("" = the problem's default)
  bool with_mfma = true;           ///< ROCm: the optional MFMA counter pass
  double per_command_cap_s = 600;  ///< no single command waits longer than this
  /// Every tool command runs under plan_sandbox(sandbox_mode, {writable: dir, vendor: platform}) —
  /// the profiled kernel is candidate code. "off" (the default here) runs them bare.
  std::string sandbox_mode = "off";
  sandbox_limits rlimits;          ///< the sandbox's limits (limits_from_config)
  /// Where profiles are kept across runs (platform/profiling/profile_cache.hpp); "" = no cache. A
  /// request whose profile is there gets it without running the tool (no invocation records; a note
  /// and detail.cached say so), and a successful profile is stored there.
  std::string cache_root;
  /// The judge's shared launcher directory of the device (platform/device/device_backend.hpp,
  /// launchers_shareable); "" = none. Under bwrap it is bound read-only and the wrapper looks
  /// launchers up there first (profile_wrapper.py --launchers).
  std::string shared_launchers;
};

struct kernel_profile_outcome {
  bool ok = false;
  /// A kernel a batch did not deliver, from start_profile_kernels' tail: not profiled on its own
  /// there (that needs the device, which was given back); its owner profiles it again.
  bool redo = false;
  /// Seconds of the profile after the device was given back (ncu's report once the profiled program
  /// had exited: start_profile_kernels); not device time, and not in wall_s.
  double report_s = 0;
  std::string platform;
  std::string error;               ///< verbatim SPEC error ("rocprof stats pass timed out after 1 s", ...)
  std::string invocation;          ///< the failing invocation's name ("setup" before any tool ran)
  std::string output_tail;         ///< the failing invocation's output
  std::string kernel_name;         ///< the kernel the parser chose
  metric_map metrics;              ///< flat: metric -> number (empty on failure)
  std::optional<roofline_result> roofline;  ///< none on failure, or when no verdict could be derived
  /// Parser detail: ROCm {kernel_name, dispatch, metrics, _raw_counters, rocprof_bin}; NVIDIA the
  /// ncu selection {kernel_name, id, dispatch_count, chosen_by_name, metrics, all_metrics, ncu_bin,
  /// kernel_filter}. Null on failure.
  nlohmann::json detail;
  std::vector<std::string> notes;  ///< e.g. why there is no roofline
  std::vector<invocation_record> records;
  double budget_s = 0;             ///< the budget the profile ran under
  double wall_s = 0;               ///< the device's seconds (the whole profile unless report_s)
};

/// Runs the whole profile (or takes it from req.cache_root). Never throws: tool failures, unusable
/// output, a missing binary or an exhausted budget come back as ok=false with the error, the
/// invocation and its output tail.
kernel_profile_outcome profile_kernel(const kernel_profile_request& req);

/// Several kernels of one device in ONE profiler process (issue 14): on NVIDIA, when every request
/// shares the problem, interpreter, device, dtype, size, sandbox and environment, one ncu runs the
/// wrapper's batch mode (one interpreter start, one CUDA context, one set of inputs) in
/// `<parent of the first dir>/batch_<first id>/`, filtered to the batch's kernels and the marker
/// launched before each (harness/batch_marker.py); each kernel's rows are the ones after its marker
/// (split_ncu_batch), chosen by the same rules as a profile of its own, and its dir gets the batch's
/// invocation record, its kernel and its metrics.json. A kernel the batch did not deliver (a failure
/// inside the batch, a device fault that ended it, a timeout) is profiled on its own with what is left
/// of its budget, the batch's record first in its invocations.jsonl: a failure inside a batch fails
/// only the kernels it concerns. One request, another platform (rocprofv3 has no range or marker
/// attribution here) or requests that differ: each profiled on its own. One outcome per request, in
/// order; never throws.
std::vector<kernel_profile_outcome> profile_kernels(const std::vector<kernel_profile_request>& reqs);

/// A profiler started before its kernels exist (issue 14: "a parent's profile <= 3 s"). Of a fresh
/// ncu profile's 9-14 s, ncu's start, the interpreter, torch, Triton and the CUDA context take 6-7 s
/// and do not depend on the kernel. A standby is that process started ahead, while the device does
/// other work: `ncu ... --nvtx --nvtx-include kagent_measured/ python profile_wrapper.py --standby
/// DIR` in `<parent of like.dir>/standby_<n>/`, under the same sandbox, budget rules and records as a
/// batch. It launches nothing on the device and holds no input until its batch comes, so it does not
/// disturb a benchmark that runs meanwhile. profile_kernels(reqs, standby) hands it the batch
/// (DIR/batch.json): each kernel's rows are the launches inside its NVTX range kagent_kernel:<ID>
/// (split_ncu_by_range); a kernel it does not deliver is profiled on its own, as in any batch. A
/// standby serves one batch and exits (candidate code never shares a process with a later one).
/// NVIDIA only (a rocprofv3 profile is several commands); KAGENT_NCU_STANDBY=0 in the request's
/// environment turns it off. Not thread-safe: one owner (a device actor) uses it.
/// The next one can start the moment one is handed its batch (profile_kernels' `next_ahead`), so that
/// its start-up (about 5 s under ncu on an H200) overlaps the batch it follows instead of the device
/// time after it: a profile that comes soon after another finds its process ready.
/// KAGENT_NCU_STANDBY_AHEAD=0 starts it only when the owner asks again (after the batch), as before.
/// Depth: up to standby_depth(like) processes wait at once (two on a GPU), so that a profile asked for
/// within a standby's start-up of the one before it (three new parents within 2 s on an H100: the
/// second batch waited 3.9 s for its process, holding the device) still finds one ready. A batch goes
/// to the oldest ready process, else to the oldest one (which is ready soonest).
struct started_profile;

/// How many ncu standbys wait at once for requests like `like`: KAGENT_NCU_STANDBY in its environment,
/// "0" (none) to "4"; unset or empty: 2 on a GPU, 1 where the wrapper runs on the CPU (tests and cpu
/// runs, where a second waiting interpreter only takes a core). Any other value: 1 (the start-up
/// checks refuse it before a run begins: check_ncu_standby).
int standby_depth(const kernel_profile_request& like);

class profiler_standby {
public:
  profiler_standby();
  ~profiler_standby();  ///< a waiting process is killed and reaped
  profiler_standby(const profiler_standby&) = delete;
  profiler_standby& operator=(const profiler_standby&) = delete;

  /// Starts processes for requests like `like` (its code is ignored) until standby_depth(like) are
  /// waiting, unless the last two ended on their own before their batch (a broken profiler: then it
  /// stays off). `idle_s`: a process gives up waiting after this long. Returns whether one is waiting.
  bool start(const kernel_profile_request& like, double idle_s = 900);
  /// Kills the waiting ones.
  void stop();
  /// A standby is running (it may still be starting up).
  bool waiting() const;
  /// How many are running (starting up or waiting).
  int running() const;
  /// How many were started; how many served a batch.
  int started() const { return started_; }
  int served() const { return served_; }

  struct process;

private:
  friend started_profile start_profile_kernels(const std::vector<kernel_profile_request>& reqs,
                                               profiler_standby* standby, bool next_ahead);
  /// A waiting process that can run `reqs` (the same problem, interpreter, device, dtype, size,
  /// sandbox, environment and ncu), handed over: the oldest ready one, else the oldest; processes that
  /// ended by themselves are reaped and counted first.
  std::unique_ptr<process> take(const std::vector<kernel_profile_request>& reqs);
  /// Reaps and records the processes that ended by themselves (counted when not for idleness).
  void reap();
  /// Starts one more process like `like`; false when it could not.
  bool start_one(const kernel_profile_request& like, double idle_s);
  /// Starts the next one like the last start() asked for (after take() handed one over), unless
  /// KAGENT_NCU_STANDBY_AHEAD=0; returns whether one is waiting now.
  bool start_next();
  std::vector<std::unique_ptr<process>> ps_;  ///< oldest first
  std::optional<kernel_profile_request> last_like_;  ///< what the last start() was asked for
  double last_idle_s_ = 0;
  int started_ = 0;
  int served_ = 0;
  int seq_ = 0;          ///< the last standby directory's number
  int ended_early_ = 0;  ///< in a row
};

/// profile_kernels with a standby: when it can run the requests (NVIDIA, the same settings), they go
/// to it instead of a new profiler process. `next_ahead`: when the standby takes the batch, the next
/// standby starts at once, beside it (the owner does not want one when no profile follows, e.g. after
/// the final profile of a run).
std::vector<kernel_profile_outcome> profile_kernels(const std::vector<kernel_profile_request>& reqs,
                                                   profiler_standby* standby, bool next_ahead = false);

/// The profiler's own processes below a standby's root, for the device's release before ncu's report
/// (start_profile_kernels): the ancestors of its program (the process whose own pid, its last NSpid,
/// is `program_pid`: what the wrapper wrote into standby.ready before any candidate code ran), up to
/// the root (tree.front()) included: bwrap, ncu's front-end script and binary, its subreaper. Empty
/// when no single such process is below the root. Told apart by position, not by name or executable,
/// which a candidate's process can borrow.
std::vector<int> profiler_ancestors(const std::vector<proc_entry>& tree, int program_pid);

/// The processes of `tree` that are not `own`: the program, whatever it left behind (reparented to a
/// subreaper or to the namespace's init), and any process the profiler started later. The device is
/// given back only when there are none.
std::vector<proc_entry> program_processes(const std::vector<proc_entry>& tree, const std::vector<int>& own);

/// A profile whose device work is over while its profiler still runs: a standby batch whose program
/// (the wrapper, the candidates' code, everything it started) has exited inside its PID namespace
/// while ncu writes its report (0.6-0.8 s a profile on an H100). What is left needs no device: finish() waits
/// for ncu, parses and attributes the report and stores the profiles in the cache; any thread may call
/// it (the owner of the standby may meanwhile start the next one).
class profile_tail {
public:
  struct state;
  explicit profile_tail(std::unique_ptr<state> s);
  ~profile_tail();
  profile_tail(const profile_tail&) = delete;
  profile_tail& operator=(const profile_tail&) = delete;
  /// One outcome per request of start_profile_kernels, in order. A kernel the batch did not deliver
  /// comes back with `redo` (and the batch's record first in its records and its invocations.jsonl):
  /// its owner profiles it again on the device. Call once; never throws.
  std::vector<kernel_profile_outcome> finish();
  /// Seconds from the batch's hand-over to the device's release.
  double held_s() const;

private:
  std::unique_ptr<state> s_;
};

/// profile_kernels(reqs, standby, next_ahead), except that a standby batch may give the device back
/// before the profile ends: when its program has exited (nothing left in the tree below ncu but the
/// profiler's own processes, program_processes) and its ncu runs in a PID namespace of its own (and was
/// ready when the batch came: its program's pid is known before any candidate code runs), it
/// returns `tail` and the caller may use the device at once. Otherwise (no standby, a fresh profile, a
/// cache hit, KAGENT_PROFILE_RELEASE=0, no namespace) `outcomes` is complete, as profile_kernels
/// gives them.
struct started_profile {
  std::vector<kernel_profile_outcome> outcomes;
  std::unique_ptr<profile_tail> tail;
};
started_profile start_profile_kernels(const std::vector<kernel_profile_request>& reqs, profiler_standby* standby,
                                      bool next_ahead = false);

/// The Triton kernel a candidate launches: the first @triton.jit (or @jit) function whose name is
/// followed by '[' somewhere in the code (a grid launch); when none is, the only @triton.jit function
/// if there is exactly one; else nullopt (no name filter: the busiest-kernel rule applies).
std::optional<std::string> derive_kernel_name(const std::string& code);

/// The timeout of the next command: min(share, what is left of the budget minus the kill grace), or
/// nullopt when less than `min_command_s` is left (the budget is exhausted).
std::optional<double> next_command_timeout(double share_s, double budget_s, double elapsed_s,
                                           double kill_grace_s = 0.5, double min_command_s = 1.0);

/// The fair share of the next command of a multi-command profile (rocprofv3's stats pass, then one
/// command per counter pass). `left_s` is what is left of the profile's budget, `commands_after` the
/// passes still to come after this one, `slowest_s` the longest command that ran so far (0: none yet).
/// Each later pass keeps a reserve of twice the slowest command plus a second (passes run the same
/// program, so they take about as long), before any ran half of an even split; the next command gets
/// the rest, never less than an even split of what is left, never more than `cap_s` (<= 0: no cap).
/// So one slow pass may take most of a generous budget instead of a fixed worst-case share of it.
double fair_command_timeout(double left_s, int commands_after, double slowest_s, double cap_s);

void to_json(nlohmann::json& j, const invocation_record& r);

/// Puts `rec` (with `verdict`) first in the invocations.jsonl of `dir` (created), before what a
/// profile of its own wrote there: a batch's record in the file of a kernel it did not deliver.
void prepend_invocation_record(const std::string& dir, invocation_record rec, const std::string& verdict);

} // namespace kagent
