#pragma once
// Device work of one GPU (or of the CPU platform): verify, benchmark and hash one kernel through the
// Python harness. Blocking, synchronous code; the evaluator actor owns one backend per device and
// serialises its requests (actors/gpu_worker.cpp). Three backends (SPEC §12.3, docs/harness.md):
//   noop     verification passes, the benchmark answers 1.0 ms, references unmeasured (dry runs)
//   warm     one harness/evaluator.py server per device, pinned through its environment (default)
//   process  a fresh harness/run_once.py per request (isolation: process)
#include <atomic>
#include <memory>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "platform/common/env.hpp"
#include "platform/common/failure_kind.hpp"
#include "platform/common/measured.hpp"
#include "platform/device/device_mode.hpp"

namespace kagent {

/// Everything a backend needs to know about its run and device.
struct device_settings {
  std::string python;          ///< harness interpreter
  std::string install_root;    ///< where harness/ is
  std::string problem_path;    ///< the kernel directory's problem.py
  std::string run_path;        ///< the run directory (children's TMPDIR, Triton cache, logs go under it)
  std::string vendor;          ///< "nvidia", "rocm" or "" (cpu, noop): decides the pin
  env_map child_env;           ///< the scrubbed environment, pinned here per device
  std::string verifier = "nvidia";  ///< the platform's verifier component: noop, cpu, nvidia, rocm
  std::string isolation = "warm";   ///< warm or process
  double test_timeout_s = 30;
  double benchmark_timeout_s = 300;
  int benchmark_warmup = 25;   ///< harness iterations
  int benchmark_repeat = 100;
  int device_id = 0;
  // The trusted evaluation (docs/harness.md "Threat model").
  std::string dtype = "bfloat16";   ///< the harness's check
  double rtol = -1, atol = -1;      ///< < 0: the dtype's default
  int trials = 3;                   ///< input sets (seeds) every candidate is verified on
  int timed_samples = 3;            ///< timed calls whose outputs are checked too
  double peak_bandwidth_gbps = 0;   ///< the device's, for the physics floor; 0: no floor
  std::vector<std::string> sandbox_prefix;  ///< argv before every candidate process ("{scratch}" = its directory)
  std::string sandbox_mode;         ///< what sandbox_prefix is: "bwrap", "rlimits", "off" ("" = unknown)
  std::string user_test = "best";   ///< best, every, never: when the kernel directory's test.py runs
  /// The run's recorded best, read when test.py is decided (run_context::recorded_best_ms); may be null.
  std::shared_ptr<const std::atomic<double>> recorded_best_ms;
  double user_test_timeout_s = 300;
  bool compile_reference = true;  ///< the starting kernel's evaluation also times torch.compile
  std::string test_path;            ///< the kernel directory's test.py
  /// Where PyTorch eager's and torch.compile's timings are kept across runs (harness/reference_cache.py;
  /// README "Caches"); "" = time them in every run.
  std::string reference_cache_dir;
};

struct device_request {
  std::string candidate_id;
  std::string code;
  device_mode mode = device_mode::verify;
  std::string work_dir;        ///< the candidate's directory; the child runs there
  /// The run's best time when the candidate was planned (not_measured: none yet). With user_test: best, a
  /// benchmark faster than this runs the kernel directory's test.py before it may become the best.
  double best_ms = not_measured;
  /// verify mode: also the program hash of a verified candidate (its compiled kernels and normalised
  /// wrapper), so that a program timed before need not be timed again. Only the warm judge backend
  /// computes it (device_result::hashed_after_verify); `isolation: process` times every candidate.
  bool hash_after_verify = false;
  /// benchmark mode: the program hash its verification computed already ("": hash after the timing).
  std::string known_hash = {};
  /// Told each step as it starts ("loading problem.py", "verifying", ...); may be unset.
  std::function<void(const std::string&)> on_step = nullptr;
};

struct device_result {
  std::string candidate_id;
  bool verified = false;
  bool benchmarked = false;
  double time_ms = not_measured;
  double time_spread_pct = 0;  ///< interquartile range / median, in %
  double eager_ms = not_measured;
  double compile_ms = not_measured;
  std::string error;           ///< what failed, for the record and for the next prompt
  std::optional<failure_kind> failure_cause;  ///< why it failed; none when it did not
  std::string code_hash;
  /// code_hash is the program hash the judge computed after this verification (hash_after_verify);
  /// false where it is the source's sha256 (other backends, or a hash step that failed).
  bool hashed_after_verify = false;
  double floor_ms = not_measured;   ///< bytes moved over peak bandwidth (not_measured: unknown)
  double floor_pct = not_measured;      ///< floor_ms / time_ms in % (100: at the hardware limit)
  bool user_tested = false;    ///< test.py ran and passed
  std::string stdout_tail;
  std::string stderr_tail;
  double wall_s = 0;
  double user_test_s = 0;      ///< of wall_s, the kernel directory's test.py run
  /// start checks: eager_ms / compile_ms were read from the reference cache, stored then ("" = timed now)
  std::string references_cached_at = {};
};

class device_backend {
public:
  virtual ~device_backend() = default;
  /// Child failures (crash, hang, wrong result) come back in the result; an exception means our own
  /// fault (e.g. an unwritable run directory).
  virtual device_result run(const device_request& req) = 0;
  /// Start what the first request would start (the warm evaluator and its problem), ahead of it. A
  /// failure here is left for that request to report.
  virtual void prepare() {}
};

/// The backend for `s`: noop when s.verifier is "noop", else process or warm by s.isolation.
std::unique_ptr<device_backend> make_device_backend(const device_settings& s);

/// The judge's shared launcher directory of a device (harness/launchers.py, judge.shared_launchers):
/// <run>/workers/gpu<N>/launchers/shared. Only the judge writes it. This runtime owns the name and the
/// rule below: the judge shares launchers only when load_problem's `launchers_dir` names the directory.
std::string shared_launcher_dir(const std::string& run_path, int device_id);

/// Whether the judge's workers share launchers there, and a process started ahead of its kernel
/// (test.py's standby, the profiler's) may look Triton launchers up in it: on NVIDIA, under bwrap (`sandbox_mode`
/// or the prefix's program), where the directory is bound read-only, unless KAGENT_SHARED_LAUNCHERS=0
/// in `env`. Elsewhere a candidate running there could write into it.
bool launchers_shareable(const std::string& vendor, const std::string& sandbox_mode, const env_map& env);

/// `prefix` (a sandbox prefix ending its own options with "--") with a read-only bind of `dir`
/// added before that "--"; unchanged when it has none.
std::vector<std::string> with_readonly_bind(const std::vector<std::string>& prefix, const std::string& dir);

} // namespace kagent
