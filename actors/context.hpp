#pragma once
// What every actor of one run shares: immutable after the manager starts, but for the one value the
// manager publishes to its devices (recorded_best_ms, an atomic behind a pointer). Passed to spawn()
// as a shared pointer to const (a local object, never a message).
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "messages/messages.hpp"
#include "platform/common/env.hpp"
#include "platform/config/config.hpp"
#include "platform/llm/provider.hpp"

namespace kagent {

/// A device of another node (kagent-actors serve) in this run: `id` is unique in the run (program.db's
/// gpu_id); the node knows it as `node_device_id`.
struct remote_device {
  int id = 0;
  std::string node;        ///< the node's name (its --name, else HOST:PORT)
  int node_device_id = 0;
  std::string name;        ///< what the node's vendor tool calls it
  device_actor_type handle;
};

struct run_context {
  run_config cfg;
  std::string kernel_dir;
  std::string problem_path;
  std::string test_path;
  std::string input_code;
  std::string problem_code;             ///< problem.py and test.py, read once at start-up for the prompts
  std::string test_code;
  std::string run_path;                 ///< the run directory
  std::string install_root;             ///< configs/, templates/, harness/
  std::string python;                   ///< harness interpreter
  std::string vendor;                   ///< "nvidia", "rocm" or "" (noop, cpu)
  std::vector<int> device_ids;          ///< one gpu worker each
  std::vector<std::string> device_names;
  std::string gpu_name;                 ///< specs key of the selected device ("" when GPU-less)
  env_map child_env;                    ///< our environment minus secrets; pinned per worker
  /// argv before every candidate process (docs/sandbox.md); "{scratch}" is its writable directory.
  std::vector<std::string> sandbox_prefix;
  double test_timeout_s = 30;
  std::string llm_record_dir;
  std::shared_ptr<llm_provider> llm;    ///< the LLM provider (recording wrapper included), built at start-up
  /// What was resolved for the run's default model, for the start line: provider, model, endpoint
  /// (base URL, or the replay directory), why this provider, and the variable the key came from.
  struct llm_choice {
    std::string provider, model, endpoint, reason, key_env;
  } llm_chosen;
  /// The other models of strategy_config.models, each with the provider it resolved to.
  std::vector<llm_choice> llm_models;
  bool resume = false;
  bool verbose = false;
  bool quiet = false;                   ///< --quiet: errors, the end and the summary only
  std::vector<std::string> notes;       ///< start-up decisions worth an event (device choice, gpu_name)
  std::string inject_fault;             ///< KAGENT_INJECT_FAULT (see README "Fault injection")
  std::string sandbox_mode;             ///< resolved at start-up: "bwrap", "rlimits" or "off" (docs/sandbox.md)
  std::string sandbox_warning;          ///< why it fell back to rlimits ("" when it did not)
  std::string cache_root;               ///< profiles kept across runs ("" = none; default_cache_root)
  /// The run's recorded best time (not_measured until the starting kernel's), written by the manager
  /// whenever it records one and read by this process's devices when they decide whether a candidate
  /// runs test.py (user_test best): a request's own bar is from when it was sent, and it may have
  /// waited on the device since. Every recorded best passed test.py, so the bar never lets an untested
  /// kernel become the best. A node's devices have their own (unwritten) one and use the request's bar.
  std::shared_ptr<std::atomic<double>> recorded_best_ms = std::make_shared<std::atomic<double>>(not_measured);
  std::vector<remote_device> remote_devices;  ///< the nodes' devices reached at start (ids in device_ids too)
  /// Every node the run names (HOST:PORT) with its gatekeeper as the start found it (invalid: not
  /// reached yet). The manager keeps a link to each: a node that is lost or late joins when it answers.
  std::vector<std::pair<std::string, caf::actor>> node_gatekeepers;

  /// "gpu1" for a device of this node, "node-a/gpu0" for a node's.
  std::string device_label(int id) const;
  const remote_device* remote(int id) const;
};

using context_ptr = std::shared_ptr<const run_context>;

/// True when KAGENT_INJECT_FAULT names `what` for `target` ("candidate_throw:r1_c0" or
/// "gpu_worker_throw:r1_c0"); a comma separates several.
bool fault_requested(const run_context& ctx, const std::string& what, const std::string& target);

} // namespace kagent
