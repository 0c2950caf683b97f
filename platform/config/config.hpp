#pragma once
// The strategy configuration: one YAML file per strategy (configs/<name>.yaml, or a user's
// $KAGENT_CONFIG_DIR/<name>.yaml), loaded strictly. Every key is typed; an unknown key, a wrong type
// or broken syntax is a user_error naming the file, the line and the key.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "platform/common/errors.hpp"

namespace kagent {

/// The range of every numeric key (README "Strategies"). A value outside is refused at load time with
/// the key and the range: such values are typos or tests of the limits, never a run anyone wants.
namespace limits {
inline constexpr double max_timeout_s = 7 * 24 * 3600.0;   ///< every *_timeout_s and profile_budget_s: 7 days
inline constexpr int max_workers = 1024;                   ///< num_workers, llm.max_concurrency
inline constexpr int max_rounds = 10000;                   ///< max_rounds, max_no_improvement, convergence_rounds
inline constexpr int max_fanout = 32;                      ///< num_top_kernels, num_bottlenecks, samples_per_prompt, models
inline constexpr int max_candidates_per_round = 256;       ///< parents x bottlenecks x models x samples (beam search)
inline constexpr double max_benchmark_iterations = 10000;  ///< benchmark_warmup, benchmark_repeat
inline constexpr double max_divergence_pct = 10000;
inline constexpr int max_refine_attempts = 50;
inline constexpr int max_tune_variants = 256;
inline constexpr double max_rtol = 10;
inline constexpr double max_atol = 1e6;
inline constexpr double max_memory_mb = 16.0 * 1024 * 1024;  ///< sandbox.memory_mb, sandbox.max_file_mb: 16 TiB
inline constexpr int max_processes = 1 << 20;
inline constexpr int max_llm_tokens = 1000000;
inline constexpr int max_requests_per_minute = 1000000;
inline constexpr int max_tokens_per_minute = 1000000000;
inline constexpr int max_llm_retries = 100;
inline constexpr double max_llm_timeout_s = 24 * 3600.0;
inline constexpr double max_usd = 1e6;                     ///< llm.budget_usd, llm.call_budget_usd
inline constexpr double max_price_per_mtok = 10000;        ///< llm.prices.*.input/output, USD per million tokens
inline constexpr int min_size_bytes = 1024;                ///< max_kernel_bytes, llm.max_reply_bytes
inline constexpr int max_kernel_bytes = 16 * 1024 * 1024;
inline constexpr int max_reply_bytes = 64 * 1024 * 1024;
} // namespace limits

/// Implementations a component can have. `cpu` runs the real harness in Triton's interpreter.
inline constexpr const char* platform_names[] = {"nvidia", "rocm", "noop", "cpu"};

/// The platform of each pipeline component (SPEC §12.3). A string in the YAML sets all of them; a
/// map sets some (the rest default to the map's `default` key, else "nvidia"). After load, every
/// field holds a concrete name; `from_string` records which form the user wrote.
struct platform_spec {
  std::string verifier = "nvidia";
  std::string benchmarker = "nvidia";
  std::string worker_runner = "nvidia";
  std::string specs_provider = "nvidia";
  std::string profiler = "nvidia";
  std::string roofline_analyzer = "nvidia";
  std::string bottleneck_analyzer = "nvidia";
  std::string rag_prescriber = "nvidia";
  bool given = false;       ///< the YAML (or CLI) named a platform; detection may fill it otherwise
  bool is_map = false;      ///< written as a per-component map (never rewritten by detection)

  static const std::vector<std::string>& component_names();
  std::string& component(const std::string& name);
  const std::string& component(const std::string& name) const;
  /// The single platform when all components agree, else "mixed".
  std::string uniform() const;
  /// The GPU vendor this run drives: "nvidia", "rocm", or "" for GPU-less platforms (noop, cpu).
  /// With a map, the vendor of the device-side components (verifier/benchmarker/profiler) decides.
  std::string vendor() const;
};

struct roofline_config {
  double sol_threshold_pct = -1;         ///< at-roofline threshold; <0: the vendor default (NVIDIA 95, ROCm 85; SPEC §6.1, §14 A.35)
  double underutilized_threshold_pct = -1;  ///< <0: vendor default (NV 60, ROCm 40)
  std::optional<bool> early_stop;        ///< unset: vendor default (NV true, ROCm false)
  int convergence_rounds = 5;
  double convergence_threshold_pct = 0.1;
};

/// Where one model of `strategy_config.models` is reached when it names its own endpoint
/// (`{model, provider, base_url, api_key_env}`); unset fields follow the `llm:` block's rules.
struct model_endpoint {
  std::string provider;
  std::string base_url;
  std::string api_key_env;
};

struct strategy_config {
  int num_top_kernels = 2;
  int num_bottlenecks = 2;
  std::vector<std::string> models;       ///< empty: the run's model
  /// Models of `models` given as maps: their own provider, endpoint or key variable.
  std::map<std::string, model_endpoint> model_endpoints;
  int samples_per_prompt = 1;
  int num_expanding_parents = -1;        ///< <0: num_top_kernels
  int max_no_improvement = 5;
  std::string schedule = "rounds";       ///< "rounds" (synchronous) or "async"
};

struct llm_config {
  std::string provider;                  ///< "", "anthropic", "openai", "openai_compatible", "relay", "replay"
  std::string base_url;
  std::string model;                     ///< empty: openai_model
  std::string api_key_env;               ///< empty: the provider's default variable
  int max_tokens = 24576;
  int max_concurrency = 4;
  bool max_concurrency_set = false;      ///< given in the config; if not, `num_workers: auto` lifts the limit
  int requests_per_minute = 0;           ///< 0: unlimited
  int tokens_per_minute = 0;
  int max_retries = 5;
  double timeout_s = 600;                ///< total per request
  double connect_timeout_s = 15;
  double idle_timeout_s = 120;           ///< between bytes of a stream
  bool stream = true;
  double budget_usd = 0;                 ///< 0: no budget
  double call_budget_usd = 0;
  std::map<std::string, std::pair<double, double>> prices;  ///< model -> (USD per Mtok in, out)
  std::string replay_dir;                ///< replay provider's recordings
  /// A reply longer than this fails its call ("reply_too_large"): max_tokens bounds a real model's
  /// reply to ~100 KB, so 1 MiB only stops a runaway endpoint or replay file.
  int max_reply_bytes = 1024 * 1024;
  /// One tiny call before the run (not for replay): a refused key, an unreachable endpoint or an
  /// unknown model stops the run at once with exit 2 (platform/llm/preflight.hpp).
  bool preflight = true;
};

struct platform_kwargs {
  std::string rocprof_bin_path;
  std::string ncu_bin_path;
};

/// The sandbox of every candidate and profiler process (docs/sandbox.md).
struct sandbox_config {
  std::string mode = "auto";             ///< auto (bwrap when it works, else rlimits), bwrap, off
  double memory_mb = 0;                  ///< memory cap of a candidate (RLIMIT_AS on the CPU platform, RLIMIT_DATA on NVIDIA); 0: half the RAM
  int max_processes = 512;               ///< RLIMIT_NPROC-like bound (processes inside the sandbox)
  double max_file_mb = 4096;             ///< RLIMIT_FSIZE
  double max_cpu_s = 0;                  ///< RLIMIT_CPU of a candidate process; 0: twice candidate_timeout_s, at least 600 s
};

/// Mutual TLS between a run and its nodes (README "Many nodes"): PEM files, all three or none. Without
/// them the links are encrypted with an anonymous key exchange and only the shared secret
/// authenticates. The key's passphrase, if any, comes from KAGENT_NODE_KEY_PASSPHRASE.
struct node_tls_config {
  std::string certificate, key, cafile;
  bool enabled() const { return !certificate.empty(); }
};

struct run_config {
  std::string name;                      ///< strategy name (file stem)
  std::string source_path;               ///< the YAML file it came from
  std::string strategy = "beam_search";  ///< "beam_search" or "greedy"
  int num_workers = 4;                   ///< fixed pipelines in flight; with num_workers_auto, the floor
  bool num_workers_auto = true;          ///< `num_workers: auto` (default): sized from measured LLM/device time
  int max_rounds = 10;
  strategy_config strategy_cfg;
  std::string openai_model = "claude-opus-4.5";
  bool high_reasoning_effort = true;
  std::string bottleneck_override;       ///< "", memory, compute, underutilized
  platform_spec platform;
  std::vector<int> gpu_ids;              ///< empty: detect
  std::string gpu_name;                  ///< empty: from the detected device
  double benchmark_warmup = 25;          ///< untimed calls before the timed ones (an iteration count)
  double benchmark_repeat = 100;         ///< timed calls (an iteration count)
  double divergence_threshold = 50.0;
  std::string target_platform = "cuda";  ///< cuda, xpu, rocm, cpu
  roofline_config roofline;
  bool use_rag = false;
  std::map<std::string, std::string> templates;  ///< template name -> file (relative to the YAML)
  platform_kwargs pkwargs;
  std::optional<double> test_timeout_s;  ///< unset: per platform (ROCm 300, CUDA 30)
  double benchmark_timeout_s = 300;
  double candidate_timeout_s = 1800;
  double profile_budget_s = 0;           ///< 0: derived from candidate_timeout_s
  /// Which kernels get a profile (ncu / rocprofv3): "parents" (a kernel when the search expands it,
  /// and the new best at the end of a round where an early stop may follow from it), "every" (also
  /// each verified candidate, before its reflexion) or "never" (no profiler call; the analysis runs
  /// on the synthetic diagnosis). The final profile of the best is taken in every mode but "never".
  std::string profile = "parents";
  std::string isolation = "warm";        ///< "warm" (one evaluator per GPU) or "process"
  /// Time torch.compile of the problem's Model in the starting kernel's evaluation (the
  /// speedup_vs_compile baseline). false: PyTorch eager only, which saves an inductor compile (tens of
  /// seconds on a cold machine) when that comparison is not wanted.
  bool compile_reference = true;
  int max_refine_attempts = 3;
  /// Launch-constant variants (BLOCK_*, num_warps, num_stages, ...) tried per verified kernel while
  /// the search waits for the LLM, one at a time per device (platform/search/tune.hpp); 0: none.
  int tune_variants = 0;
  std::vector<std::string> secret_env_patterns;  ///< empty: default_secret_patterns()
  /// Nodes (`kagent-actors serve`, HOST:PORT) whose devices join the run (README "Many nodes").
  std::vector<std::string> nodes;
  /// Whether the manager's own node runs candidates too (false: only the nodes' devices).
  bool local_devices = true;
  node_tls_config node_tls;
  /// When the kernel directory's own test.py runs on a candidate: "best" (before it becomes the new
  /// best), "every" (every verified candidate) or "never".
  std::string user_test = "best";
  double user_test_timeout_s = 300;      ///< one test.py run, fresh process
  std::string dtype = "bfloat16";        ///< the harness's check: bfloat16, float16, float32
  std::optional<double> rtol;            ///< unset: 1e-2 for 16-bit dtypes, 1e-4 for float32
  std::optional<double> atol;
  sandbox_config sandbox;
  llm_config llm;
  std::string python = "python3";        ///< interpreter for the harness
  /// Bound on input.py, problem.py and test.py (refused at start-up) and on the code taken from a
  /// reply (sent back as unusable): each goes into every prompt, so its size is the run's cost.
  int max_kernel_bytes = 256 * 1024;
};

/// Loads one YAML file strictly. Throws user_error "<file>:<line>: <what> (key '<k>'; expected <type>)".
run_config load_config_file(const std::string& path);

/// Parses YAML text (for tests); `origin` names it in errors.
run_config parse_config(const std::string& yaml_text, const std::string& origin);

/// Where strategies are looked up: $KAGENT_CONFIG_DIR (if set) first, then the built-in configs/.
std::vector<std::string> config_search_dirs();

/// Strategy name -> YAML path over the search dirs (a user dir shadows a built-in of the same name).
std::map<std::string, std::string> discover_strategies(const std::vector<std::string>& dirs);

/// Loads the strategy named `name` (or a path to a .yaml file). Unknown name: user_error listing names.
run_config load_strategy(const std::string& name, const std::vector<std::string>& dirs);

/// Serialises back to YAML (the resolved config stored in the run directory).
std::string to_yaml(const run_config& cfg);

} // namespace kagent
