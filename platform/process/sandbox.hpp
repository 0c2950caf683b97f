#pragma once
// The sandbox of a candidate or profiler process, planned as an ARGV PREFIX: put `plan.prefix` before
// the real command line and run the result. The C++ runner and the Python harness (which spawns its
// own candidate workers) use the same plan. docs/sandbox.md has the threat model.
//
// "bwrap":   bubblewrap — own PID namespace (a fresh /proc: the parent is invisible), no network,
//            the whole filesystem read-only except the writable directories and a private /tmp,
//            a minimal /dev plus the GPU nodes of the vendor, a new session, dies with its parent;
//            inside it, prlimit sets the resource limits. Everything left in the PID namespace dies
//            with the command (setsid'd and double-forked children included).
// "rlimits": the fallback where bubblewrap is missing or cannot create namespaces: setpriv
//            --pdeathsig KILL (dies with its parent) and prlimit; the caller's process group kill
//            is the only other containment. `warning` says why.
// "off":     no prefix.
#include <string>
#include <vector>

#include "platform/config/config.hpp"

namespace kagent {

struct sandbox_limits {
  unsigned long long address_space_bytes = 0;  ///< RLIMIT_AS; 0: none (GPU runtimes reserve huge ranges)
  /// RLIMIT_DATA (private writable mappings: what a process really allocates); the memory cap on
  /// NVIDIA hosts, where RLIMIT_AS cannot be used (measured on the H200: a CUDA process reserves
  /// 18 GB of address space, its VmData stays at 1.4 GB). 0: none.
  unsigned long long data_bytes = 0;
  int max_processes = 512;                     ///< RLIMIT_NPROC (bwrap mode only; see docs/sandbox.md)
  unsigned long long max_file_bytes = 4ULL << 30;  ///< RLIMIT_FSIZE; 0: none
  double cpu_time_s = 0;                       ///< RLIMIT_CPU; 0: none
};

struct sandbox_request {
  std::vector<std::string> writable;  ///< scratch directories (must exist), bound read-write
  std::vector<std::string> readable;  ///< bound read-only again on top of the private /tmp: inputs that
                                      ///< may live under /tmp (kernel dir, harness, interpreter)
  std::string vendor;                 ///< "nvidia", "rocm" or "" (cpu): which device nodes are bound
  sandbox_limits limits;
  std::vector<std::string> hidden;    ///< files masked by /dev/null (e.g. the .env kagent-actors read)
  bool network = false;               ///< true: keep the host's network namespace
  bool share_dev_shm = false;         ///< true: bind the host's /dev/shm read-write (POSIX shared memory
                                      ///< by name between a judge and its worker); default: a private one
};

struct sandbox_plan {
  std::string mode;                 ///< "bwrap", "rlimits" (fallback) or "off"
  std::vector<std::string> prefix;  ///< argv to put before the real command; empty for "off"
  std::string warning;              ///< non-empty when we fell back (for the run start line)
};

/// `mode`: "auto" (bwrap when the probe works, else the rlimits fallback with a warning), "bwrap"
/// (required: throws user_error when it does not work), "rlimits", or "off". Another mode throws
/// user_error. The probe is cached, so planning per candidate costs microseconds.
sandbox_plan plan_sandbox(const std::string& mode, const sandbox_request& req);

struct bwrap_probe {
  bool ok = false;
  std::string path;  ///< the bwrap binary ($KAGENT_BWRAP, else bwrap on PATH); "" when none
  std::string why;   ///< when !ok: one line
};

/// Cached probe: can bwrap create the namespaces here (`bwrap --unshare-pid --unshare-net --ro-bind /
/// / --proc /proc --dev /dev -- /bin/true`)? Honours KAGENT_BWRAP (the path of a bwrap binary to use,
/// for machines where it is carried, not installed).
const bwrap_probe& probe_bwrap();

/// Runs the probe again (tests; after KAGENT_BWRAP changed).
const bwrap_probe& reprobe_bwrap();

/// The GPU device nodes of `vendor` that exist here (/dev/nvidia*, /dev/nvidia-caps, /dev/kfd,
/// /dev/dri ...); empty for "".
std::vector<std::string> gpu_device_nodes(const std::string& vendor);

/// The limits of a run's `sandbox:` section. Memory (memory_mb, else half the host's RAM): RLIMIT_AS
/// on the CPU platform (vendor ""), RLIMIT_DATA on "nvidia", none on "rocm". CPU time: max_cpu_s,
/// else `default_cpu_s` (0: none). Processes and file size as configured.
sandbox_limits limits_from_config(const sandbox_config& cfg, const std::string& vendor, double default_cpu_s = 0);

/// `prefix + argv`.
std::vector<std::string> sandboxed_argv(const sandbox_plan& plan, const std::vector<std::string>& argv);

} // namespace kagent
